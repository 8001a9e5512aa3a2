#!/usr/bin/env bash
# Prints an expected-failure list from a kiln-conformance run: one line per failing test with
# the failure message as its reason. For starting a list or reviewing one; a test that starts
# passing is taken off by hand when kiln-conformance reports it as FIXED.
#   tests/conformance/write_expected_failures.sh RUNNER SUITE_DIR [reference|compiled]
set -euo pipefail
runner=$1
suite=$2
mode=${3:-reference}
"$runner" --suite "$suite" --mode "$mode" | sed -n 's/^FAIL \([^:]*\): \(.*\)$/\1  \2/p' | cut -c1-200
