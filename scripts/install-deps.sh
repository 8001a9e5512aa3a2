#!/usr/bin/env bash
# Installs every build and test dependency of Kiln from Debian 12 packages.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-numpy
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libssl-dev
  llvm-19-dev lld-19 liblld-19-dev libzstd-dev zlib1g-dev libedit-dev libxml2-dev libcurl4-openssl-dev
  libsqlite3-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libonnx-dev libonnx-testdata python3-onnx libdlpack-dev python3-yaml clang-format
  python3-torch python3-torchvision
  # OpenBLAS: artifacts of targets with libraries=openblas load libopenblas.so.0, and the
  # bench compares with it.
  libopenblas-dev libopenblas0-pthread
  # oneDNN: artifacts of targets with libraries=dnnl load libdnnl.so.2 (no header needed).
  libdnnl2
  # Backends other than x86_64: cross toolchains build kiln-runner for aarch64 and riscv64,
  # qemu-user runs it; wasm32 artifacts run in Node.js and headless Chromium.
  g++-aarch64-linux-gnu g++-riscv64-linux-gnu qemu-user nodejs chromium
  # PostgreSQL: libpq for the fleet tier (cache/fleet_tier.h); the server for its tests.
  postgresql-15 libpq-dev
  # openssl: the TLS tests make their certificates with it (tests/support/make_test_certs.sh).
  openssl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The offline Kubernetes schema validator of tests/deploy (kubernetes-models), pinned by
# tests/deploy/package-lock.json, into tests/deploy/node_modules (git-ignored). Debian's
# nodejs has no npm; a Node.js that bundles npm (NodeSource) must not get Debian's.
# The Dockerfile runs this script before it copies the sources in: no tests there, no npm.
deploy_tests="$(dirname "${BASH_SOURCE[0]}")/../tests/deploy"
# The stamp is the lock file that node_modules was installed from: a new lock reinstalls.
stamp="$deploy_tests/node_modules/.kiln-installed-from-lock"
if [ ! -f "$deploy_tests/package-lock.json" ]; then
  echo "install-deps: no tests/deploy here; its npm packages are not needed"
elif cmp -s "$deploy_tests/package-lock.json" "$stamp"; then
  echo "install-deps: tests/deploy npm packages present"
else
  if ! command -v npm >/dev/null; then
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends npm
  fi
  echo "install-deps: installing tests/deploy npm packages"
  npm ci --prefix "$deploy_tests" --no-audit --no-fund
  cp "$deploy_tests/package-lock.json" "$stamp"
fi
