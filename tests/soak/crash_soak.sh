#!/usr/bin/env bash
# The crash test for longer than make test runs it: kilnd_crash_test's SIGKILL test, run
# again and again with fresh seeds (a fresh data dir each run, so kiln.db stays a size a
# restart checks quickly), until a run fails or RUNS runs passed. Run by hand:
#
#   tests/soak/crash_soak.sh [BUILD_DIR]        (default: build)
#
#   KILN_CRASH_ROUNDS   SIGKILLs per run (default 300: kiln.db grows ~2 MiB a round, and every
#                       round copies and integrity-checks it; ~8 minutes a run on 2 cores)
#   RUNS                runs (default 10; 0: until one fails or Ctrl-C)
#   KILN_CRASH_SEED     the first run's seed (default: random); run i uses SEED + i
#   KILN_CRASH_KEEP=1   keep every run's data dir and kilnd log, not only a failed one's
#
# A failed run prints its seed: KILN_CRASH_SEED=<seed> KILN_CRASH_ROUNDS=<n> RUNS=1 reruns it.
set -euo pipefail

build_dir=${1:-build}
test_binary="$build_dir/tests/crash/kilnd_crash_test"
if [[ ! -x "$test_binary" ]]; then
  echo "crash_soak: no $test_binary; build it first: ninja -C $build_dir kilnd kilnd_crash_test" >&2
  exit 2
fi
export KILN_CRASH_ROUNDS=${KILN_CRASH_ROUNDS:-300}
runs=${RUNS:-10}
seed=${KILN_CRASH_SEED:-$(( (RANDOM << 15) | RANDOM ))}
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/kiln_crash_soak.XXXXXX")
echo "crash_soak: $KILN_CRASH_ROUNDS kills a run, ${runs/#0/unbounded} runs from seed $seed; logs in $log_dir"

run=0
start=$SECONDS
while [[ $runs -eq 0 || $run -lt $runs ]]; do
  run_seed=$((seed + run))
  log="$log_dir/run_$run.log"
  if KILN_CRASH_SEED=$run_seed TEST_TMPDIR="$log_dir" "$test_binary" \
      --gtest_filter='CrashTest.SigkillAtRandomPoints*' > "$log" 2>&1; then
    summary=$(grep -E '^(rounds|partial)' "$log" | tr '\n' ';')
    echo "run $run (seed $run_seed) passed after $((SECONDS - start)) s: $summary"
  else
    echo "run $run (seed $run_seed) FAILED; its output:" >&2
    tail -n 60 "$log" >&2
    echo "rerun: KILN_CRASH_SEED=$run_seed KILN_CRASH_ROUNDS=$KILN_CRASH_ROUNDS RUNS=1 $0 $build_dir" >&2
    exit 1
  fi
  run=$((run + 1))
done
echo "crash_soak: $run runs, $((run * KILN_CRASH_ROUNDS)) SIGKILLs, no failure in $((SECONDS - start)) s"
