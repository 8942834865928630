#!/usr/bin/env bash
# Builds the peer exporters the Kafka benchmark runs beside cdcwatch (bench/kafka_lag.py), from their sources at the
# commits docs/benchmarks.md names, with Go's own `go build` and dependencies from the Go module proxy.
#
#   scripts/build-peers.sh KMINION_GIT BURROW_GIT KAFKA_EXPORTER_GIT
#
# Each argument is a git repository of that peer (a local checkout or snapshot, or a URL git can clone):
# github.com/redpanda-data/kminion, github.com/linkedin/Burrow, github.com/danielqsj/kafka_exporter.
# Writes .cdcwatch/peers/bin/{kminion,burrow,kafka_exporter}, each with a .commit file; a binary already built at its
# commit is kept. Module and build caches stay under .cdcwatch/peers/, so a second build downloads nothing.
# Then: CDCWATCH_PEERS_BIN=.cdcwatch/peers/bin .venv/bin/python bench/kafka_lag.py
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -ne 3 ]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
command -v go >/dev/null || { echo "go is not installed: the peers are Go programs (Go 1.22 or newer)" >&2; exit 2; }

peers=.cdcwatch/peers
mkdir -p "$peers/src" "$peers/bin"
export GOMODCACHE="$PWD/$peers/gomod" GOCACHE="$PWD/$peers/gocache" GOFLAGS=-mod=mod

build() {  # name, repository, commit
    local name=$1 repository=$2 commit=$3 binary="$peers/bin/$1"
    if [ -x "$binary" ] && [ "$(cat "$binary.commit" 2>/dev/null)" = "$commit" ]; then
        echo "$name: built at $commit already"
        return
    fi
    if [ ! -d "$peers/src/$name/.git" ]; then
        git clone --quiet "$repository" "$peers/src/$name"
    fi
    git -C "$peers/src/$name" checkout --quiet "$commit" || {
        echo "$name: commit $commit is not in $repository; give a repository that has it" >&2; exit 2; }
    echo "$name: building $commit"
    (cd "$peers/src/$name" && go build -o "../../bin/$name" .)
    echo "$commit" > "$binary.commit"
}

# the commits bench/kafka_peers.py and docs/benchmarks.md name
build kminion "$1" 4f3867a4400b
build burrow "$2" ced55ba90f6b
build kafka_exporter "$3" 953e2f1745b9
echo "peers in $peers/bin: CDCWATCH_PEERS_BIN=$peers/bin .venv/bin/python bench/kafka_lag.py"
