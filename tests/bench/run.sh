#!/bin/sh
# Run every benchmark program build/bench_* and every tests/bench/bench_*.lua
# (common.lua is their shared helper, not a benchmark).
# Figures are ratios against references measured in the same run.
B=${1:-build}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-22}
# Each benchmark starts with the CPU, its features, the BLAS kernels, the
# threads and the load average (core/base/blas.h, tests/bench/header.h,
# B.system in common.lua).
# The C benchmarks run the kernels the srgeo shell runs: when it sets
# OPENBLAS_CORETYPE itself (OpenBLAS's table does not know the CPU), so do
# they.
if [ -z "$OPENBLAS_CORETYPE" ]; then
    ct=$("$B/srgeo" -e 'io.write(os.getenv("SRGEO_BLAS_CORETYPE") or "")' 2>/dev/null)
    [ -n "$ct" ] && export OPENBLAS_CORETYPE="$ct" SRGEO_BLAS_CORETYPE="$ct"
fi
for b in "$B"/bench_*; do
    [ -x "$b" ] || continue
    echo "== $(basename "$b")"
    "$b" || echo "(benchmark $(basename "$b") failed)"
done
for f in tests/bench/bench_*.lua; do
    [ -f "$f" ] || continue
    echo "== $f"
    "$B/srgeo" "$f" || echo "(benchmark $f failed)"
done
