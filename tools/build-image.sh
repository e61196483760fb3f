#!/usr/bin/env bash
# build-image.sh: build the installer image from Dockerfile with Debian's buildah and podman, for
# amd64 and arm64, and one manifest list naming both, with no container registry.
#
#   1. base, per arch: the build root of tools/build.sh (Debian bookworm made with debootstrap
#      from the mirror this machine's apt sources name, with python3.11, gcc ...; cached),
#      `podman import`ed as $BASE_IMAGE-<arch>. Kept between runs; REBUILD_BASE=1 imports again.
#   2. the build context is the committed tree (`git archive HEAD`), not the work tree, so the
#      image is what the commit says; CONTEXT=worktree builds the work tree as it is.
#   3. `buildah bud --platform linux/<arch> --isolation chroot --network host` per arch (another
#      arch's build stage runs under qemu-user, tools/binfmt.sh), tagged $IMAGE-<arch>, with the
#      host's CA bundle and a build-only pip.conf naming it passed as --volume (HTTPS may be
#      intercepted by a local CA; the Dockerfile itself stays standard and never sees either).
#   4. the manifest list $IMAGE: one name for every arch, what the DaemonSet names (pushed with
#      `buildah manifest push --all $IMAGE docker://<registry>/cni-delguard:<tag>`).
#   5. the SBOM of each arch's image (CycloneDX JSON: the base's Debian packages and the bundle's
#      Python ones, written in the build stage by tools/release/sbom.py, the release's own code)
#      copied out to $SBOM_DIR/cni-delguard-<version>-<arch>.cdx.json.
# The base goes in by its image ID (content-addressed: a tag could be moved) and with its own
# Debian package versions as the Dockerfile's APT_PINS (the build's apt-get changes nothing).
#
# Usage: tools/build-image.sh [ARCH...]    (default: amd64 arm64) prints each build's time and
#   size. Environment: IMAGE (default localhost/cni-delguard:<version in pyproject.toml>),
#   BASE_IMAGE (default localhost/cni-delguard-base:bookworm), CA_BUNDLE, REBUILD_BASE, CONTEXT,
#   SBOM_DIR (default dist/sbom).
# Needs root and: apt-get install buildah podman debootstrap runc (qemu-user-static for arm64 on
# amd64, which tools/binfmt.sh installs).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
image=${IMAGE:-localhost/cni-delguard:$version}
base=${BASE_IMAGE:-localhost/cni-delguard-base:bookworm}
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
sbom_dir=${SBOM_DIR:-$repo/dist/sbom}
# The SBOM's source: the project's home as packaging/project.env publishes it (empty as shipped).
source_url=$(sed -n 's/^CNI_DELGUARD_REPOSITORY=//p' packaging/project.env)
# The Dockerfile's APT_PINS packages, at the versions the base holds (tools/build.sh's root).
apt_packages=(python3 python3.11 python3.11-venv libpython3.11 binutils gcc libc6-dev)
arches=("$@")
[ "${#arches[@]}" -gt 0 ] || arches=(amd64 arm64)

for tool in buildah podman debootstrap; do
    command -v "$tool" >/dev/null || { echo "build-image.sh: $tool not found" >&2; exit 1; }
done

make_base() { # ARCH
    local tag=$base-$1 root start=$SECONDS
    if podman image exists "$tag" && [ -z "${REBUILD_BASE:-}" ]; then
        echo "base image $tag exists (REBUILD_BASE=1 to import it again)"
        return
    fi
    root=$(tools/build.sh --root-template --arch "$1")
    tar -C "$root" --numeric-owner --exclude=./.complete -cf - . |
        podman import --quiet --arch "$1" --os linux - "$tag" >/dev/null
    echo "base image $tag imported in $((SECONDS - start)) s"
}

build() { # ARCH CONTEXT LOG-DIR
    local start=$SECONDS size id pins
    [ "$1" = "$(dpkg --print-architecture)" ] || tools/binfmt.sh "$1"
    id=$(podman image inspect --format '{{.Id}}' "$base-$1")
    pins=$(chroot "$(tools/build.sh --root-template --arch "$1")" \
        dpkg-query -W -f '${Package}=${Version} ' "${apt_packages[@]}")
    buildah bud --isolation chroot --network host --layers --platform "linux/$1" \
        --volume "$ca:/etc/pip-build-ca.crt:ro" --volume "$3/pip.conf:/etc/pip.conf:ro" \
        --build-arg "BASE=$id" --build-arg "APT_PINS=$pins" \
        --build-arg "SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)" \
        --build-arg "REVISION=$(git rev-parse HEAD)" --build-arg "SOURCE_URL=$source_url" \
        --tag "$image-$1" --file "$2/Dockerfile" "$2" \
        >"$3/$1.log" 2>&1 || { tail -n 40 "$3/$1.log" >&2; exit 1; }
    size=$(podman image inspect --format '{{.Size}}' "$image-$1")
    echo "image $image-$1 built in $((SECONDS - start)) s, $((size / 1024 / 1024)) MiB (base $id)"
    sbom "$1"
}

sbom() { # ARCH: the image's SBOM, copied out beside the others
    local ctr out=$sbom_dir/cni-delguard-$version-$1.cdx.json
    mkdir -p "$sbom_dir"
    ctr=$(podman create --quiet "$image-$1")
    podman cp "$ctr:/usr/share/doc/cni-delguard/sbom.cdx.json" "$out" >/dev/null
    podman rm --force "$ctr" >/dev/null
    echo "SBOM $out"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
context=$repo
if [ "${CONTEXT:-head}" != worktree ]; then
    context=$tmp/context
    mkdir "$context"
    git archive --format=tar HEAD | tar -C "$context" -xf -
fi
printf '[global]\ncert = /etc/pip-build-ca.crt\n' >"$tmp/pip.conf"
for arch in "${arches[@]}"; do
    make_base "$arch"
    build "$arch" "$context" "$tmp"
done
# One name for every arch: a node pulls the image of its own.
if buildah manifest exists "$image"; then
    buildah manifest rm "$image" >/dev/null
elif podman image exists "$image"; then
    podman rmi --force "$image" >/dev/null  # a single-arch image of that name, from before
fi
buildah manifest create "$image" >/dev/null
for arch in "${arches[@]}"; do
    buildah manifest add --arch "$arch" --os linux "$image" "containers-storage:$image-$arch" >/dev/null
done
echo "manifest list $image: ${arches[*]}"
