# Sourced by the bench scripts that watch a running paypipe-bench.
# pipeline_up ERRFILE BENCH_PID: prints the "name=pid ..." pairs of the pipeline once the bench
# logs "pipeline up" (bounded: 30 s), or fails when the bench exits first.
pipeline_up() {
    local errfile="$1" bench="$2" line=""
    for _ in $(seq 1 300); do
        line="$(grep -m1 'pipeline up' "$errfile" || true)"
        [[ -n "$line" ]] && break
        kill -0 "$bench" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n "$line" ]] || { echo "the benchmark did not start a pipeline; see $errfile" >&2; return 1; }
    echo "${line#*pipeline up: }"
}
