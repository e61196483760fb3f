#!/usr/bin/env bash
# e2e-fetch-cri-proto.sh: put the CRI runtime v1 api.proto into the e2e cache, from Debian's package.
#
# crictl is not packaged by Debian, so tests/e2e_cri talks CRI through a Python gRPC client
# whose stubs are generated at test time from this proto. Debian trixie's
# golang-github-kubernetes-cri-api-dev ships it; the .deb is fetched through tools/apt-private.sh
# (the machine's own mirror, private source list) and unpacked with dpkg-deb -x. Idempotent.
#
# Usage: tools/e2e-fetch-cri-proto.sh            (writes <repo>/.cache/e2e/cri-api/api.proto)
# Environment: DELGUARD_E2E_CACHE (default <repo>/.cache/e2e).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${DELGUARD_E2E_CACHE:-$repo/.cache/e2e}
pkg=golang-github-kubernetes-cri-api-dev
inner=usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto
dest=$cache/cri-api/api.proto

if [ -s "$dest" ]; then
    echo "e2e-fetch-cri-proto: $dest already there"
    exit 0
fi
mkdir -p "$cache/debs" "$cache/cri-api"
"$repo/tools/apt-private.sh" update
# apt-get download writes into the current directory; _apt cannot read a root-owned dir, which
# only costs a warning (the download then runs unsandboxed as root).
(cd "$cache/debs" && "$repo/tools/apt-private.sh" apt-get download -q "$pkg/trixie")
deb=$(ls -t "$cache"/debs/"${pkg}"_*_all.deb | head -n 1)
tmp=$(mktemp -d "$cache/extract.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
cp "$tmp/$inner" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "e2e-fetch-cri-proto: $dest from $(basename "$deb")"
