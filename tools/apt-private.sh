#!/usr/bin/env bash
# apt-private.sh: run apt-get / apt-cache / apt-get source against a private source list.
#
# The machine's own apt sources are never edited. This script reads the Debian mirror the machine
# already uses (from /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list), writes a private
# source list naming that same mirror for bookworm, bookworm-backports and trixie (deb and deb-src),
# keeps its package lists in a private state dir, and passes both to apt with -o options.
#
# Usage:
#   tools/apt-private.sh update
#   tools/apt-private.sh apt-get source -d golang-github-containernetworking-cni/trixie
#   tools/apt-private.sh apt-get install -y -t bookworm-backports golang-go
#   tools/apt-private.sh apt-cache policy containerd
#   tools/apt-private.sh mirror          (prints the machine's Debian mirror URI)
#
# Environment: APT_PRIVATE_DIR (default: <repo>/.cache/apt-private).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${APT_PRIVATE_DIR:-$repo/.cache/apt-private}
mkdir -p "$dir/lists/partial" "$dir/archives/partial"

mirror() {
    local uri=""
    if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
        # deb822: the first URIs line of a stanza whose Suites name a plain Debian suite.
        uri=$(awk '/^URIs:/ {u=$2} /^Suites:/ && u != "" && $0 !~ /security/ {print u; exit}' \
            /etc/apt/sources.list.d/*.sources)
    fi
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' \
            /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || { echo "apt-private: no Debian mirror found in the machine's apt sources" >&2; exit 1; }
    printf '%s\n' "${uri%/}"
}

if [ "${1:-}" = mirror ]; then
    mirror
    exit 0
fi

list=$dir/sources.list
if [ ! -s "$list" ]; then
    m=$(mirror)
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    {
        for suite in bookworm bookworm-updates bookworm-backports trixie; do
            echo "deb [signed-by=$keyring] $m $suite main"
            echo "deb-src [signed-by=$keyring] $m $suite main"
        done
    } >"$list.tmp"
    mv "$list.tmp" "$list"
fi

opts=(
    -o "Dir::Etc::SourceList=$list"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$dir/lists"
    -o "Dir::Cache::Archives=$dir/archives"
    -o "APT::Default-Release=bookworm"
    -o "Acquire::Retries=3"
)

cmd=${1:?usage: apt-private.sh update | apt-get ARGS... | apt-cache ARGS...}
shift
case "$cmd" in
    update) exec apt-get "${opts[@]}" -qq update ;;
    apt-get | apt-cache) exec "$cmd" "${opts[@]}" "$@" ;;
    *) echo "apt-private: unknown command $cmd" >&2; exit 2 ;;
esac
