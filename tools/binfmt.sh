#!/usr/bin/env bash
# binfmt.sh ARCH: make this machine run ARCH's programs (Debian's dpkg arch name, e.g. arm64)
# through qemu-user: installs Debian's qemu-user-static and binfmt-support when missing
# (tools/install-deps.sh qemu), mounts binfmt_misc when it is not mounted, and enables the
# handler. Idempotent; as root.
set -euo pipefail

arch=${1:?usage: binfmt.sh ARCH}
case $arch in
    arm64) qemu=aarch64 ;;
    amd64) qemu=x86_64 ;;
    *) echo "binfmt.sh: no qemu name known for $arch" >&2; exit 2 ;;
esac
log() { printf 'binfmt: %s\n' "$*" >&2; }

"$(dirname "$0")/install-deps.sh" qemu
if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e "/proc/sys/fs/binfmt_misc/qemu-$qemu" ]; then
    update-binfmts --enable "qemu-$qemu" >&2
fi
grep -qx enabled "/proc/sys/fs/binfmt_misc/qemu-$qemu" || {
    log "qemu-$qemu is registered but not enabled"
    exit 1
}
