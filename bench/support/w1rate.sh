# Sourced by bench/latency/run and bench/latency/segments: W1 at a fixed rate, run and read the
# same way in both.

# w1rate_bench BIN OUT RATE [paypipe-bench flags...]: W1 at RATE orders/s for 10 s after a warm-up
# of 200, results in OUT/bench, its output in OUT/bench.out and OUT/bench.err. It becomes
# paypipe-bench (exec), so that `$!` is the benchmark's PID: call it with `&` or in `( )`.
w1rate_bench() {
    local bin="$1" out="$2" rate="$3"
    shift 3
    exec "$bin/paypipe-bench" --bin-dir "$bin" --max-seconds 120 --scenarios w1rate --w1-rate "$rate" --submitters 2 --warmup 200 \
        "$@" --out "$out/bench" >"$out/bench.out" 2>"$out/bench.err"
}

# w1rate_summary OUT RATE WHAT: prints "W1 at R orders/s WHAT: p50 .. ms, p99 .. ms", or fails
# when the benchmark wrote no W1@RATE row.
w1rate_summary() {
    local out="$1" rate="$2" what="$3" summary
    summary="$(grep -m1 '^| W1@' "$out/bench/summary.md" 2>/dev/null || true)"
    [[ -n "$summary" ]] || { echo "the benchmark printed no W1@$rate row; see $out" >&2; return 1; }
    echo "$summary" | awk -F'|' -v what="$what" '{gsub(/ /, "", $5); gsub(/ /, "", $6); gsub(/ /, "", $8); printf "W1 at %s orders/s%s: p50 %s ms, p99 %s ms (send to outcome)\n", $5, what, $6, $8}'
}
