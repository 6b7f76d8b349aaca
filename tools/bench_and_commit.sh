#!/usr/bin/env bash
# Run `gnnperf bench` in the background and commit what it stores every N minutes (each
# finished split run, then the report), so a session ending mid-benchmark loses at most
# the run in progress.
#
#   tools/bench_and_commit.sh [MINUTES] -- gnnperf bench args...
#   tools/bench_and_commit.sh 10 -- --splits leave_family_out --jobs 2 --max-minutes 60
set -u
minutes=${1:-10}
shift
[ "${1:-}" = "--" ] && shift
exec "$(dirname "$0")/commit_while_running.sh" "$minutes" benchmarks bench \
    /tmp/gnnperf-bench.log -- python -m gnnperf bench "$@"
