#!/usr/bin/env bash
# build-image.sh: build the installer image from Dockerfile with Debian's buildah and podman,
# with no container registry: the base is made here with debootstrap.
#
#   1. base: `debootstrap --variant=minbase bookworm` from the Debian mirror this machine's apt
#      sources name (read now, never written into the repo), `podman import`ed as $BASE_IMAGE.
#      Kept between runs; REBUILD_BASE=1 makes it again.
#   2. the build context is the committed tree (`git archive HEAD`), not the work tree, so the
#      image is what the commit says; CONTEXT=worktree builds the work tree as it is.
#   3. `buildah bud --isolation chroot --network host`, with the host's CA bundle and a
#      build-only pip.conf naming it passed as --volume (HTTPS may be intercepted by a local CA;
#      the Dockerfile itself stays standard and never sees either).
#
# Usage: tools/build-image.sh          prints the build time and the image's size at the end
# Environment: IMAGE (default localhost/cni-delguard:<version in pyproject.toml>),
#   BASE_IMAGE (default localhost/cni-delguard-base:bookworm), CA_BUNDLE, REBUILD_BASE, CONTEXT.
# Needs root and: apt-get install buildah podman debootstrap runc
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
image=${IMAGE:-localhost/cni-delguard:$version}
base=${BASE_IMAGE:-localhost/cni-delguard-base:bookworm}
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

for tool in buildah podman debootstrap; do
    command -v "$tool" >/dev/null || { echo "build-image.sh: $tool not found" >&2; exit 1; }
done

make_base() {
    if podman image exists "$base" && [ -z "${REBUILD_BASE:-}" ]; then
        echo "base image $base exists (REBUILD_BASE=1 to make it again)"
        return
    fi
    local tmp start=$SECONDS
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    debootstrap --variant=minbase bookworm "$tmp/rootfs" "$(tools/apt-private.sh mirror)" >"$tmp/log" 2>&1 \
        || { tail -n 20 "$tmp/log" >&2; exit 1; }
    tar -C "$tmp/rootfs" --numeric-owner -cf - . | podman import --quiet - "$base" >/dev/null
    echo "base image $base made in $((SECONDS - start)) s"
}

build() {
    local tmp start=$SECONDS context=$repo
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    if [ "${CONTEXT:-head}" != worktree ]; then
        context=$tmp/context
        mkdir "$context"
        git -C "$repo" archive --format=tar HEAD | tar -C "$context" -xf -
    fi
    printf '[global]\ncert = /etc/pip-build-ca.crt\n' >"$tmp/pip.conf"
    buildah bud --isolation chroot --network host --layers \
        --volume "$ca:/etc/pip-build-ca.crt:ro" --volume "$tmp/pip.conf:/etc/pip.conf:ro" \
        --build-arg "BASE=$base" --build-arg "SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct)" \
        --tag "$image" --file "$context/Dockerfile" "$context" \
        >"$tmp/log" 2>&1 || { tail -n 40 "$tmp/log" >&2; exit 1; }
    local size
    size=$(podman image inspect --format '{{.Size}}' "$image")
    echo "image $image built in $((SECONDS - start)) s, $((size / 1024 / 1024)) MiB"
}

make_base
build
