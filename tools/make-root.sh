#!/usr/bin/env bash
# make-root.sh SUITE ARCH [PACKAGE...]: a Debian root file system made with debootstrap from the
# Debian mirror this machine's apt sources name (tools/apt-private.sh mirror; never written into
# the repo), kept in a cache and printed as a path. A second call with the same arguments only
# prints it. The root is a template: tests mount an overlay on it (tests/support/noderoot.py) and
# never write into it.
#
#   tools/make-root.sh bullseye amd64 containernetworking-plugins   a node with glibc 2.31
#   tools/make-root.sh bookworm arm64 python3.11 ...                 a foreign root (qemu-user)
#
# A foreign ARCH needs Debian's qemu-user-static and binfmt_misc (tools/binfmt.sh makes sure).
# Cache: $DELGUARD_CACHE_DIR (default /var/cache/cni-delguard)/roots/<suite>-<arch>-<key>, where
# key digests the suite, arch, variant and packages, so a changed recipe makes a new root; made
# under a lock, in a temp dir renamed into place when complete (never half a root).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
suite=${1:?usage: make-root.sh SUITE ARCH [PACKAGE...]}
arch=${2:?usage: make-root.sh SUITE ARCH [PACKAGE...]}
shift 2
packages=$(printf '%s\n' "$@" | sort -u | paste -sd, -)
variant=minbase
cache=${DELGUARD_CACHE_DIR:-/var/cache/cni-delguard}/roots
key=$(printf '%s|%s|%s|%s' "$suite" "$arch" "$variant" "$packages" | sha256sum | cut -c1-12)
dest=$cache/$suite-$arch-$key

log() { printf 'make-root: %s\n' "$*" >&2; }

if [ -f "$dest/.complete" ]; then
    echo "$dest"
    exit 0
fi
command -v debootstrap >/dev/null || { log "debootstrap not found (tools/install-deps.sh demo)"; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$dest/.complete" ]; then
    echo "$dest"
    exit 0
fi
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
    "$repo/tools/binfmt.sh" "$arch" >&2
fi
tmp=$(mktemp -d "$cache/.new.XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT
start=$SECONDS
log "debootstrap $suite $arch${packages:+, then $packages} (once; cached in $dest)"
if ! debootstrap --variant="$variant" --arch="$arch" \
    "$suite" "$tmp/root" "$("$repo/tools/apt-private.sh" mirror)" >"$tmp/log" 2>&1; then
    tail -n 30 "$tmp/log" >&2
    exit 1
fi
# The packages with the root's own apt (debootstrap's --include resolves dependencies less
# completely: python3.11-venv failed to configure that way), with /proc mounted for their scripts
# in a private mount namespace: it goes with the namespace, however the install ends.
if [ -n "$packages" ]; then
    unshare --mount-proc="$tmp/root/proc" --propagation private -- \
        chroot "$tmp/root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive sh -c \
        "apt-get -qq update && apt-get -qq install -y --no-install-recommends ${packages//,/ }" \
        >>"$tmp/log" 2>&1 || { tail -n 30 "$tmp/log" >&2; exit 1; }
fi
rm -rf "$tmp/root/var/cache/apt/archives"/*.deb "$tmp/root/var/lib/apt/lists"/*_Packages
touch "$tmp/root/.complete"
rm -rf "$dest"
mv "$tmp/root" "$dest"
log "made $dest in $((SECONDS - start)) s"
echo "$dest"
