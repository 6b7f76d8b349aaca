#!/usr/bin/env bash
# Run a long job in the background and commit the folders it writes every N minutes, so a
# session that ends at any moment loses at most the last interval's output. Only those
# folders are committed (`git commit --only`), never other staged work; the library itself
# never calls git.
#
#   tools/commit_while_running.sh MINUTES "FOLDER..." WHAT LOG -- COMMAND ARGS...
#
# WHAT names the output in the commit message ("Dataset: datasets/shards (3 files added or
# grown)"); LOG receives the job's output. collect_and_commit.sh and bench_and_commit.sh
# are this with their folders filled in.
set -u
minutes=${1:?minutes between commits}
folders=${2:?folders to commit}
what=${3:?what the folders hold}
log=${4:?log file}
shift 4
[ "${1:-}" = "--" ] && shift
cd "$(git rev-parse --show-toplevel)" || exit 1
"$@" > "$log" 2>&1 &
job=$!
commit_output() {
    # shellcheck disable=SC2086  # $folders lists one or more paths
    git add $folders 2>/dev/null
    # shellcheck disable=SC2086
    if ! git diff --cached --quiet -- $folders; then
        # the file count, not `gnnperf dataset stats` (minutes of CPU taken from the job)
        # shellcheck disable=SC2086
        n=$(git diff --cached --name-only -- $folders | wc -l)
        # shellcheck disable=SC2086
        git commit -q --only $folders -m "$what: $folders ($n files added or grown)"
    fi
}
while kill -0 "$job" 2>/dev/null; do
    for _ in $(seq $((minutes * 6))); do
        kill -0 "$job" 2>/dev/null || break
        sleep 10
    done
    commit_output
done
commit_output
wait "$job"
