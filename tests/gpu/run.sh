#!/usr/bin/env bash
# Runs Kiln's CUDA artifacts on this machine's NVIDIA GPU: builds Kiln, then compiles and runs
# every ONNX conformance suite and the model tests for the GPU's target (cuda-sm90 on compute
# capability 9.x, else cuda-sm80), against the same expected-failure lists as the CPU. `make
# test` cannot do this: it has no GPU, so it checks the PTX and runs the GPU schedules on the
# CPU. Usage: tests/gpu/run.sh (from anywhere; KILN_BUILD_DIR overrides the build folder).
set -euo pipefail

cd "$(dirname "$0")/../.."
build=${KILN_BUILD_DIR:-build}
testdata=/usr/share/libonnx-testdata/data
expected=tests/conformance/expected_failures

if ! command -v nvidia-smi >/dev/null; then
  echo "tests/gpu/run.sh: nvidia-smi not found: this needs a machine with an NVIDIA GPU and its driver" >&2
  exit 1
fi
if ! gpus=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader); then
  echo "tests/gpu/run.sh: nvidia-smi cannot query the GPU (is the driver loaded?)" >&2
  exit 1
fi
echo "GPU: ${gpus}"
capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')
major=${capability%%.*}
if [[ -z "${major}" || "${major}" -lt 8 ]]; then
  echo "tests/gpu/run.sh: compute capability '${capability}': Kiln's CUDA targets need 8.0 or later" >&2
  exit 1
fi
case "${capability}" in
  9.*) target=cuda-sm90 ;;
  *) target=cuda-sm80 ;;
esac
if [[ ! -d "${testdata}" ]]; then
  echo "tests/gpu/run.sh: ${testdata} not found (install libonnx-testdata: scripts/install-deps.sh)" >&2
  exit 1
fi

cmake -S . -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "${build}"

# Every step runs, whatever the one before gave; the summary says which failed.
results=()
failed=0
run_step() {
  local name=$1
  shift
  echo
  echo "=== ${name}: $*"
  if "$@"; then
    results+=("PASS  ${name}")
  else
    results+=("FAIL  ${name} (exit $?)")
    failed=1
  fi
}

# The CUDA device of the runtime over its fake driver: quick, and no GPU needed.
run_step "runtime device tests" "${build}/tests/unit/runtime_device_test"
for suite in node pytorch-converted pytorch-operator simple; do
  lists=(--expected-failures "${expected}/compiled_${suite}.txt")
  if [[ -f "${expected}/${target}/compiled_${suite}.txt" ]]; then
    lists+=(--expected-failures "${expected}/${target}/compiled_${suite}.txt")
  fi
  run_step "conformance ${suite} on ${target}" "${build}/tests/conformance/kiln-conformance" \
    --suite "${testdata}/${suite}" --mode compiled --target "${target}" "${lists[@]}"
done
run_step "model tests on ${target}" env KILN_TEST_CUDA="${target}" "${build}/tests/models/model_test"

echo
echo "=== Summary (${target} on ${gpus})"
printf '%s\n' "${results[@]}"
exit "${failed}"
