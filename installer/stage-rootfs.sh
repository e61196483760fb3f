#!/bin/sh
# stage-rootfs.sh BUNDLE ROOTFS: lay out the final image's filesystem in ROOTFS: the one-folder
# BUNDLE at /usr/lib/cni-delguard, an empty /tmp, and the system libraries it needs that
# PyInstaller leaves to the host (glibc, the dynamic loader, and what the bootloader links before
# it can point the loader at its own _internal/), found with ldd. Run by the Dockerfile.
set -eu
bundle=$1
rootfs=$2
dest=$rootfs/usr/lib/cni-delguard
mkdir -p "$rootfs/usr/lib" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp -a "$bundle" "$dest"

# ldd FILE... -> the absolute paths of the libraries they load (the loader included).
libs() {
    ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(/ {print $1}'
}

{
    # The bootloader runs before its _internal/ is on the search path: all of its libraries.
    libs "$dest/cni-delguard"
    # Bundled libraries: only what the bundle does not carry itself.
    find "$dest/_internal" -type f -name '*.so*' | while read -r so; do libs "$so"; done \
        | while read -r lib; do
            [ -e "$dest/_internal/$(basename "$lib")" ] || echo "$lib"
        done
} | sort -u | while read -r lib; do
    cp -L --parents "$lib" "$rootfs"
done
chroot "$rootfs" /usr/lib/cni-delguard/cni-delguard --version
echo "rootfs staged: $(du -sh "$rootfs" | cut -f1), $(find "$rootfs" -type f | wc -l) files"
