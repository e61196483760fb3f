#!/usr/bin/env bash
# release.sh: the release of one commit, every artifact a user installs or checks, signed.
#
#   tools/release.sh --home-url URL --home-image IMAGE --key COSIGN_KEY [--out DIR] [--no-cache]
#       writes dist/release/VERSION/ (VERSION: pyproject.toml's, semver) from a clean commit (a
#       tree with changes or untracked files is refused):
#         cni-delguard-VERSION-linux-{amd64,arm64}.tar.gz  the bundles (tools/build.sh)
#         cni-delguard-VERSION-image.oci.tar   one multi-arch OCI image (both arches), an OCI
#                                              archive; its digest in ...-image.digest
#         cni-delguard-VERSION.tgz             the chart (`helm package`), its default image
#                                              IMAGE@DIGEST
#         cni-delguard-VERSION-linux-ARCH.cdx.json   each arch's SBOM (CycloneDX): the base's
#                                              Debian packages and the bundle's Python packages
#         cni-delguard-VERSION-provenance.slsa.json  the SLSA provenance predicate (source commit,
#                                              command, builder) `cosign attest` attaches at push
#         SHA256SUMS                           over all of the above
#         SHA256SUMS.sig, cni-delguard-VERSION.tgz.sig, cosign.pub   cosign signatures
#   tools/release.sh ... --push PREFIX        the same, then pushes the image to PREFIX/cni-delguard
#       and the chart to oci://PREFIX/charts, signs the image there (cosign sign, by digest),
#       attests the provenance (cosign attest) and prints the exact commands to verify and
#       install. --from DIR pushes a release written before (no build).
#   tools/release.sh --check-reproducible [--arch ARCH]   two releases of HEAD from two clean
#       clones, each bundle built afresh (--no-cache), unsigned; compares the image digest, the
#       chart's bytes and SHA256SUMS and names the first file that differs.
#
# The project's public home is one release parameter: --home-url (the source repository, named
# by the provenance and the image's annotations) and --home-image (where the image is published,
# the chart's default image.repository), or DELGUARD_HOME_URL and DELGUARD_HOME_IMAGE. There is
# no default: an invented address must not ship.
#
# The key: --key or COSIGN_KEY (a cosign key file; COSIGN_PASSWORD its password, as cosign reads
# it). Signatures are made with no transparency log (--tlog-upload=false): verify with
# --insecure-ignore-tlog=true (docs/building.md). --no-sign writes everything but the signatures
# (what --check-reproducible and the reproducibility test do: a signature is not deterministic).
#
# Reproducible: every artifact except the signatures depends on the commit only. The bundles are
# tools/build.sh's (its own cache, keyed by every input, is reused unless --no-cache: building a
# commit twice in one build root gives the same bytes, tests/test_build_from_archive.py); the
# image, the SBOMs, the tarballs and the provenance are written by python3 -m tools.release
# (sorted entries, times from SOURCE_DATE_EPOCH = the commit's time, owner 0, gzip without a
# time); the chart is repacked the same way (tools/build-chart.sh).
#
# Needs root (tools/build.sh's build roots), the pinned helm (tools/build-chart.sh builds it),
# cosign (Debian trixie's, unpacked under .cache by tools/unpack-deb.sh; COSIGN overrides) and for
# --push skopeo (apt-get install skopeo). A registry on loopback (127.0.0.1, localhost) is spoken
# to over plain HTTP, as containerd does by default; every other one over TLS.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
arches=(amd64 arm64)
home_url=${DELGUARD_HOME_URL:-}
home_image=${DELGUARD_HOME_IMAGE:-}
key=${COSIGN_KEY:-}
out="" push="" from="" sign=1 no_cache="" check=""
command=(tools/release.sh)  # the flags the provenance records (no key, no path of this machine)

log() { printf 'release.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e 's/^# \{0,1\}//' -e '$d' >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --home-url) home_url=${2-}; shift 2 ;;
        --home-image) home_image=${2-}; shift 2 ;;
        --key) key=${2:?}; shift 2 ;;
        --out) out=${2:?}; shift 2 ;;
        --push) push=${2:?}; shift 2 ;;
        --from) from=${2:?}; shift 2 ;;
        --no-sign) sign=""; shift ;;
        --no-cache) no_cache=--no-cache; shift ;;
        --arch) arches=("${2:?}"); command+=(--arch "$2"); shift 2 ;;
        --check-reproducible) check=1; shift ;;
        -h | --help) usage ;;
        *) log "unknown argument $1"; usage ;;
    esac
done

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
[[ $version =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
    die "pyproject.toml's version '$version' is not semver (MAJOR.MINOR.PATCH[-PRE])"
cosign=${COSIGN:-}
find_cosign() {
    [ -n "$cosign" ] || cosign=$(tools/unpack-deb.sh cosign/trixie usr/bin/cosign)
}
loopback() { [[ $1 =~ ^(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?(/|$) ]]; }

# --check-reproducible: two clones of HEAD, a release in each, compared.
check_reproducible() {
    local a b da db start=$SECONDS t1 t2
    work=$(mktemp -d "${TMPDIR:-/tmp}/delguard-repro.XXXXXX")  # global: the EXIT trap reads it
    trap 'rm -rf --one-file-system "$work"' EXIT
    for side in a b; do
        git clone --quiet --no-hardlinks "$repo" "$work/$side"
        git -C "$work/$side" checkout --quiet --detach "$(git rev-parse HEAD)"
    done
    a=$work/a/dist/release/$version b=$work/b/dist/release/$version
    local args=(--home-url "$home_url" --home-image "$home_image" --no-sign --no-cache)
    [ "${#arches[@]}" -eq 2 ] || args+=(--arch "${arches[0]}")
    (cd "$work/a" && tools/release.sh "${args[@]}")
    t1=$((SECONDS - start))
    (cd "$work/b" && tools/release.sh "${args[@]}")
    t2=$((SECONDS - start - t1))
    da=$(cat "$a/cni-delguard-$version-image.digest") db=$(cat "$b/cni-delguard-$version-image.digest")
    log "first release: $t1 s, image $da"
    log "second release: $t2 s, image $db"
    if ! python3 -m tools.release diff "$a" "$b"; then
        die "not reproducible (arches: ${arches[*]})"
    fi
    log "reproducible (${arches[*]}): the same image digest, chart bytes and SHA256SUMS"
    printf '%s\n' "$da"
}

build() { # DEST
    local dest=$1 revision epoch arch root digest bundles=() sboms=()
    revision=$(git rev-parse HEAD)
    epoch=$(git log -1 --format=%ct)
    export SOURCE_DATE_EPOCH=$epoch
    stage=$(mktemp -d "$(dirname "$dest")/.stage.XXXXXX")  # global: the EXIT trap reads it
    trap 'rm -rf --one-file-system "$stage"' EXIT
    local meta=(--version "$version" --revision "$revision" --source "$home_url" --epoch "$epoch")
    local name=cni-delguard-$version
    for arch in "${arches[@]}"; do
        tools/build.sh --arch "$arch" $no_cache >&2
        local bundle=dist/cni-delguard
        [ "$arch" = "$(dpkg --print-architecture)" ] || bundle=dist/$arch/cni-delguard
        root=$(tools/build.sh --root-template --arch "$arch")
        python3 -m tools.release tar --prefix cni-delguard --epoch "$epoch" "$bundle" \
            "$stage/$name-linux-$arch.tar.gz"
        python3 -m tools.release sbom "${meta[@]}" --arch "$arch" \
            --status "$root/var/lib/dpkg/status" --bundle "$bundle" "$stage/$name-linux-$arch.cdx.json"
        bundles+=(--bundle "$arch=$bundle") sboms+=(--sbom "$arch=$stage/$name-linux-$arch.cdx.json")
    done
    digest=$(python3 -m tools.release image "${meta[@]}" "${bundles[@]}" "${sboms[@]}" \
        "$stage/$name-image.oci.tar")
    printf '%s\n' "$digest" >"$stage/$name-image.digest"
    tools/build-chart.sh --image "$home_image@$digest" --out "$stage" >/dev/null
    (cd "$stage" && sha256sum -- *.tar.gz *.oci.tar *.digest *.tgz *.cdx.json | sort -k2 >SHA256SUMS)
    python3 -m tools.release provenance "${meta[@]}" --sums "$stage/SHA256SUMS" \
        --builder "${DELGUARD_RELEASE_BUILDER:-local:$(. /etc/os-release && echo "$ID-$VERSION_ID")-$(dpkg --print-architecture)}" \
        --command "$(printf '%q ' "${command[@]}")" "$stage/$name-provenance.slsa.json"
    (cd "$stage" && sha256sum -- *.tar.gz *.oci.tar *.digest *.tgz *.cdx.json *.slsa.json |
        sort -k2 >SHA256SUMS)
    if [ -n "$sign" ]; then
        for f in SHA256SUMS "$name.tgz"; do
            "$cosign" sign-blob --yes --tlog-upload=false --key "$key" \
                --output-signature "$stage/$f.sig" "$stage/$f" >/dev/null
        done
        "$cosign" public-key --key "$key" >"$stage/cosign.pub"
    fi
    rm -rf "$dest"
    mv -T "$stage" "$dest"
    chmod 0755 "$dest"
    trap - EXIT
    log "wrote $dest: image $digest"
}

# Push DIR's image and chart to PREFIX, sign and attest the image there, print the install.
push_release() { # DIR PREFIX
    local dir=$1 prefix=${2%/} digest name=cni-delguard-$version tls=() http=() plain=()
    digest=$(cat "$dir/$name-image.digest")
    local image=$prefix/cni-delguard
    if loopback "$prefix"; then
        tls=(--dest-tls-verify=false) http=(--allow-http-registry) plain=(--plain-http)
    fi
    command -v skopeo >/dev/null || die "--push needs skopeo (apt-get install skopeo)"
    # --preserve-digests: refuse any conversion, the registry gets the very bytes signed here.
    skopeo copy --quiet --all --preserve-digests "${tls[@]}" \
        "oci-archive:$dir/$name-image.oci.tar:$version" "docker://$image:$version"
    # The helm tools/build-chart.sh packaged with (the newest pinned one) unless HELM says.
    local helm row
    row=$(awk '$1 == "helm" {v = $2} END {print v}' peers/pins.tsv)
    helm=${HELM:-${DELGUARD_PEERS_CACHE:-/var/cache/cni-delguard/peers}/helm-$row/bin/helm}
    "$helm" push "${plain[@]}" "$dir/$name.tgz" "oci://$prefix/charts" >&2
    "$cosign" sign --yes --tlog-upload=false "${http[@]}" --key "$key" "$image@$digest" >&2
    "$cosign" attest --yes --tlog-upload=false "${http[@]}" --key "$key" --type slsaprovenance1 \
        --predicate "$dir/$name-provenance.slsa.json" "$image@$digest" >&2
    local set=""
    [ "$image" = "$home_image" ] || set=" --set image.repository=$image"
    cat <<EOF
# verify (cosign.pub: the release's public key, from the project's home)
cosign verify --key cosign.pub --insecure-ignore-tlog=true${http:+ ${http[*]}} $image@$digest
helm pull${plain:+ ${plain[*]}} oci://$prefix/charts/cni-delguard --version $version
cosign verify-blob --key cosign.pub --insecure-ignore-tlog=true --signature $name.tgz.sig $name.tgz
# install (the chart's default image is $home_image@$digest)
helm install cni-delguard${plain:+ ${plain[*]}} oci://$prefix/charts/cni-delguard --version $version \\
    --namespace kube-system$set
EOF
}

# Unset by flag or environment: the project's home as packaging/project.env publishes it (the
# chart's metadata and the alerts' runbook links read the same file, tools/project.py).
[ -n "$home_url" ] || home_url=$(python3 tools/project.py --get repository 2>/dev/null) || true
[ -n "$home_image" ] || home_image=$(python3 tools/project.py --get image 2>/dev/null) || true
[ -n "$home_url" ] && [ -n "$home_image" ] ||
    die "the project's home is not set: --home-url URL --home-image REGISTRY/PATH/cni-delguard" \
        "(or DELGUARD_HOME_URL, DELGUARD_HOME_IMAGE, or packaging/project.env); there is no" \
        "default address"
command+=(--home-url "$home_url" --home-image "$home_image")
if [ -n "$check" ]; then
    check_reproducible
    exit 0
fi
if [ -n "$sign" ] || [ -n "$push" ]; then
    [ -n "$key" ] || die "no signing key: --key FILE or COSIGN_KEY (a cosign key pair's .key)"
    find_cosign
fi
dest=${from:-${out:-dist/release/$version}}
if [ -n "$from" ]; then
    # The release's own version, which need not be this tree's.
    digest_file=$(find "$from" -maxdepth 1 -name 'cni-delguard-*-image.digest' -print -quit)
    [ -n "$digest_file" ] || die "$from holds no release (no cni-delguard-VERSION-image.digest)"
    version=$(basename "$digest_file" -image.digest)
    version=${version#cni-delguard-}
else
    [ -z "$(git status --porcelain --untracked-files=normal)" ] ||
        die "the tree has changes or untracked files: a release is made from a clean commit"
    mkdir -p "$(dirname "$dest")"
    start=$SECONDS
    build "$dest"
    log "release $version built in $((SECONDS - start)) s"
fi
[ -z "$push" ] || push_release "$dest" "$push"
