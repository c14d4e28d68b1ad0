#!/bin/sh
# Run the layering rules of core/, the C unit tests, the Lua specs and the
# fuzz targets (when built); print one combined closing line
# "N passed, N failed" (the format CI reads).
B=${1:-build}
# See core/shell/shell.c: spinning OpenMP and OpenBLAS workers fight for the cores.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-22}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
lua5.4 tests/layers.lua | tee -a "$out" || status=1
"$B/test_core" | tee -a "$out" || status=1
"$B/srgeo" tests/run.lua | tee -a "$out" || status=1
# Every file parser's fuzz target, bounded (built by make test when clang and
# libFuzzer are installed; FUZZ_SECONDS=0 or unset: not run).
if [ "${FUZZ_SECONDS:-0}" != 0 ]; then sh tests/fuzz/run.sh "$FUZZ_SECONDS" | tee -a "$out" || status=1; fi
p=$(sed -n 's/^[a-z]*: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
f=$(sed -n 's/^[a-z]*: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$out" | awk '{s+=$1} END {print s+0}')
k=$(sed -n 's/^[a-z]*: [0-9]* passed, [0-9]* failed, \([0-9]*\) skipped.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
n=$(grep -c 'passed, .* failed' "$out")
[ "$n" -ge 3 ] || { echo "a test runner did not finish"; f=$((f+1)); }
if [ "$k" -gt 0 ]; then echo "$p passed, $f failed, $k skipped"; else echo "$p passed, $f failed"; fi
[ "$status" -eq 0 ] && [ "$f" -eq 0 ]
