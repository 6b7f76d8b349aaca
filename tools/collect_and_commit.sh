#!/usr/bin/env bash
# Run the collector in the background and commit its shards every N minutes, so that
# a session ending at any moment loses at most the last interval's records.
#
#   tools/collect_and_commit.sh [--code DIR] [--kernels|--tuning] [MINUTES] -- gnnperf collect args...
#   tools/collect_and_commit.sh 20 -- --out datasets --families all --count 30 \
#       --hw x86-64-v2:1,x86-64-v2:2,x86-64-v3:1,x86-64-v3:2 --build default,sampled:0
#   tools/collect_and_commit.sh --kernels 15 -- --out datasets --families all --count 4
#
# With --code DIR the collector (and its measuring workers) run in DIR, a `git worktree`
# of a fixed commit, so the working tree can change under a collection that lasts hours;
# give --out as an absolute path then (the shards are still committed here):
#   git worktree add --detach /tmp/collector HEAD
#   tools/collect_and_commit.sh --code /tmp/collector 15 -- --out "$PWD/datasets" \
#       --families corpus --count 2 --hw x86-64-v3:1,x86-64-v3:2 --build default,sampled:0
# With --kernels it runs `gnnperf collect-kernels` and commits datasets/kernels, and
# datasets/shards for the whole-model tuned records it adds; with --tuning it runs
# `gnnperf collect-tuning` (MetaSchedule's evolutionary search per kernel) and commits
# datasets/kernels and datasets/shards for the whole-model tuned:N records it adds. Only those folders are committed (`git commit --only`), never other
# staged work.
set -u
code=
if [ "${1:-}" = "--code" ]; then
    code=$(cd "${2:?--code needs a folder}" && pwd)
    shift 2
fi
command=collect
folder=datasets/shards
if [ "${1:-}" = "--kernels" ]; then
    command=collect-kernels
    folder="datasets/kernels datasets/shards"
    shift
elif [ "${1:-}" = "--tuning" ]; then
    command=collect-tuning
    folder="datasets/kernels datasets/shards"
    shift
fi
minutes=${1:-20}
shift
[ "${1:-}" = "--" ] && shift
exec "$(dirname "$0")/commit_while_running.sh" "$minutes" "$folder" Dataset \
    "/tmp/gnnperf-$command.log" -- env -C "${code:-.}" python -m gnnperf "$command" "$@"
