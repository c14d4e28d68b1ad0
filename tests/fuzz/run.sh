#!/bin/sh
# tests/fuzz/run.sh SECONDS [BINDIR]: run every built libFuzzer target
# (BINDIR/fuzz_NAME, default build/fuzz) for SECONDS from its corpus; one
# ok/FAIL line each and "fuzz: N passed, N failed" (the format tests/run.sh
# counts).  A crash, a leak, a timeout or an input above FUZZ_RSS_MB fails
# its target and leaves BINDIR/crash-* (or leak-*, timeout-*, oom-*) to turn
# into a test; the log is BINDIR/NAME.log.
secs=${1:-20}
dir=${2:-build/fuzz}
rss=${FUZZ_RSS_MB:-2048}
p=0 f=0
for bin in "$dir"/fuzz_*; do
    [ -x "$bin" ] && [ -f "$bin" ] || continue
    n=${bin##*/fuzz_}
    mkdir -p "$dir/corpus_$n"
    if "$bin" -max_total_time="$secs" -rss_limit_mb="$rss" -timeout=20 -artifact_prefix="$dir/" \
        "$dir/corpus_$n" "tests/fuzz/corpus_$n" >"$dir/$n.log" 2>&1; then
        runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$dir/$n.log")
        echo "ok   fuzz: $n (${runs:-?} runs in $secs s, no crash, leak, timeout or oom)"
        p=$((p + 1))
    else
        tail -40 "$dir/$n.log"
        echo "FAIL fuzz: $n (log: $dir/$n.log)"
        f=$((f + 1))
    fi
done
if [ $((p + f)) -eq 0 ]; then
    echo "fuzz: no targets built in $dir (clang and libFuzzer: sh scripts/install-deps.sh --test)"
    echo "fuzz: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
echo "fuzz: $p passed, $f failed"
[ "$f" -eq 0 ]
