#!/usr/bin/env bash
# unpack-deb.sh: a tool the tests run, from its Debian package, unpacked into <repo>/.cache/<package>
# and never installed into the system: no maintainer script runs (no service is started, no user
# made), dpkg's database is not touched, and a package of the same name the machine may already
# have (Google's kubectl, say) is left alone. Fetched through tools/apt-private.sh (a private
# source list; the system's is never edited), so any suite it names can be used.
#
#   tools/unpack-deb.sh PACKAGE[/SUITE] PATH    prints <repo>/.cache/PACKAGE/PATH, the tool
#
# Idempotent: when PATH is there already it only prints it. tools/test.sh uses it for kubectl
# (trixie's) and docker-registry (the OCI registry the chart is pushed to).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
spec=${1:?usage: unpack-deb.sh PACKAGE[/SUITE] PATH}
path=${2:?usage: unpack-deb.sh PACKAGE[/SUITE] PATH}
dest=$repo/.cache/${spec%%/*}
if [ -x "$dest/$path" ]; then
    echo "$dest/$path"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt's _apt user downloads into it
"$repo/tools/apt-private.sh" update
(cd "$tmp" && "$repo/tools/apt-private.sh" apt-get -qq download "$spec") >&2
rm -rf "$dest.new"
dpkg-deb -x "$tmp"/"${spec%%/*}"_*.deb "$dest.new"
[ -x "$dest.new/$path" ] || { echo "unpack-deb.sh: $spec has no executable $path" >&2; exit 1; }
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "$dest/$path"
