#!/bin/sh
# stage-rootfs.sh BUNDLE ROOTFS: lay out the final image's filesystem in ROOTFS: the one-folder
# BUNDLE at /usr/lib/cni-delguard and an empty /tmp, nothing else. The bundle carries its own
# loader and C library (packaging/selfcontain.py), so the image needs no system library at all;
# the check below runs it chrooted into ROOTFS to prove it. Run by the Dockerfile.
set -eu
bundle=$1
rootfs=$2
dest=$rootfs/usr/lib/cni-delguard
mkdir -p "$rootfs/usr/lib" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp -a "$bundle" "$dest"
chroot "$rootfs" /usr/lib/cni-delguard/cni-delguard --version
echo "rootfs staged: $(du -sh "$rootfs" | cut -f1), $(find "$rootfs" -type f | wc -l) files"
