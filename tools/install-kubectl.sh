#!/usr/bin/env bash
# install-kubectl.sh: Debian's kubectl (source package kubernetes, trixie) for the manifest tests
# (`kubectl kustomize`, offline), unpacked into <repo>/.cache/kubectl, never into the system: the
# machine may already have another package named kubectl (Google's), which dpkg would replace.
# Fetched through tools/apt-private.sh (a private source list; the system's is never edited).
# Prints the binary's path. Idempotent: a second run only prints it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dest=$repo/.cache/kubectl
bin=$dest/usr/bin/kubectl
if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt's _apt user downloads into it
"$repo/tools/apt-private.sh" update
(cd "$tmp" && "$repo/tools/apt-private.sh" apt-get -qq download kubectl/trixie) >&2
rm -rf "$dest.new"
dpkg-deb -x "$tmp"/kubectl_*.deb "$dest.new"
"$dest.new/usr/bin/kubectl" version --client >&2
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "$bin"
