#!/usr/bin/env bash
# Run the collector in the background and commit its shards every N minutes, so that
# a session ending at any moment loses at most the last interval's records.
#
#   scripts/collect_and_commit.sh [MINUTES] -- gnnperf collect args...
#   scripts/collect_and_commit.sh 20 -- --out datasets --families all --count 30 \
#       --hw x86-64-v2:1,x86-64-v2:2,x86-64-v3:1,x86-64-v3:2 --build default,sampled:0
#
# Only datasets/shards is committed (`git commit --only`), never other staged work.
set -u
minutes=${1:-20}
shift
[ "${1:-}" = "--" ] && shift
cd "$(git rev-parse --show-toplevel)" || exit 1
python -m gnnperf collect "$@" > /tmp/gnnperf-collect.log 2>&1 &
collector=$!
commit_shards() {
    git add datasets/shards 2>/dev/null
    if ! git diff --cached --quiet -- datasets/shards; then
        n=$(python -m gnnperf dataset stats --json 2>/dev/null | python -c \
            "import json,sys; print(json.load(sys.stdin)['records'])" 2>/dev/null || echo "?")
        git commit -q --only datasets/shards -m "Dataset: shards ($n records)"
    fi
}
while kill -0 "$collector" 2>/dev/null; do
    for _ in $(seq $((minutes * 6))); do
        kill -0 "$collector" 2>/dev/null || break
        sleep 10
    done
    commit_shards
done
commit_shards
