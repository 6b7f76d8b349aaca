#!/usr/bin/env bash
# Run `gnnperf bench` in the background and commit what it stores every N minutes (each
# finished split run, then the report), so a session ending mid-benchmark loses at most
# the run in progress. The library itself never calls git.
#
#   tools/bench_and_commit.sh [MINUTES] -- gnnperf bench args...
#   tools/bench_and_commit.sh 10 -- --splits leave_family_out --jobs 2 --max-minutes 60
set -u
minutes=${1:-10}
shift
[ "${1:-}" = "--" ] && shift
cd "$(git rev-parse --show-toplevel)" || exit 1
python -m gnnperf bench "$@" > /tmp/gnnperf-bench.log 2>&1 &
bench=$!
commit_results() {
    git add benchmarks 2>/dev/null
    if ! git diff --cached --quiet -- benchmarks; then
        n=$(git diff --cached --name-only -- benchmarks | wc -l)
        git commit -q --only benchmarks -m "bench: $n result files added or updated"
    fi
}
while kill -0 "$bench" 2>/dev/null; do
    for _ in $(seq $((minutes * 6))); do
        kill -0 "$bench" 2>/dev/null || break
        sleep 10
    done
    commit_results
done
commit_results
wait "$bench"
