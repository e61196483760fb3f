#!/usr/bin/env bash
# build-chart.sh: package the Helm chart, charts/cni-delguard/, into
# dist/charts/cni-delguard-<version>.tgz, its version and appVersion the project's (pyproject.toml;
# the image tag the chart names by default is its appVersion, the one tools/build-image.sh builds;
# the image's repository has no default: the one you pushed to, `image.repository`).
#
#   tools/build-chart.sh                      the project's version
#   tools/build-chart.sh --version V [--app-version A] [--out DIR]
#                                             another version (the tests package two to compare
#                                             an upgrade), somewhere else than dist/charts
#   tools/build-chart.sh --image REPOSITORY@sha256:DIGEST
#                                             the image the chart names by default (values.yaml
#                                             image.repository and image.digest): what
#                                             tools/release.sh packages, naming the release's image
#
# The package depends on the chart's files only: `helm package` stamps every entry with the time
# of the packing (writeToTar in helm v3's pkg/chartutil/save.go: `ModTime: time.Now()`), so it is
# repacked with the entries' names, modes and contents unchanged, each time the commit's
# (SOURCE_DATE_EPOCH, else the last commit's time), owner 0 and a gzip header without a time
# (python3 -m tools.release normalize). Two packagings of one commit give the same bytes.
#
# Before packaging: the chart's generated parts must be current (tools/generate-chart.py --check:
# the layouts' paths, the monitoring and OpenShift objects, the version) and `helm lint --strict`
# clean with the values of ci/watch-values.yaml (the defaults and an image.repository, which the
# chart refuses to render without). The helm is $HELM, else the newest `helm` row of peers/pins.tsv, built by
# tools/install-peers.sh if it is not yet (a few minutes, once). Prints the package's path.
#
# To publish it in an OCI registry (docs/install.md):
#   helm registry login REGISTRY      # if it asks for credentials
#   helm push dist/charts/cni-delguard-<version>.tgz oci://REGISTRY/PATH
#   helm install cni-delguard oci://REGISTRY/PATH/cni-delguard --version <version> -n kube-system \
#       --set image.repository=REGISTRY/PATH/cni-delguard
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
chart=$repo/charts/cni-delguard
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml" | head -n 1)
app_version=
image=
out=$repo/dist/charts

die() { printf 'build-chart: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --version) version=${2:?--version needs a value}; shift 2 ;;
        --app-version) app_version=${2:?--app-version needs a value}; shift 2 ;;
        --out) out=${2:?--out needs a dir}; shift 2 ;;
        --image) image=${2:?--image needs REPOSITORY@sha256:DIGEST}; shift 2 ;;
        *) die "unknown argument $1 (see the header of $0)" ;;
    esac
done
[ -n "$version" ] || die "no version in pyproject.toml"
app_version=${app_version:-$version}

# The newest pinned helm: the last `helm` row of pins.tsv (the same cache tests/support/peers.py
# reads), built on first use.
pinned_helm() {
    local row
    row=$(awk '$1 == "helm" {v = $2} END {print v}' "$repo/peers/pins.tsv")
    [ -n "$row" ] || die "peers/pins.tsv has no helm row"
    local bin=${DELGUARD_PEERS_CACHE:-/var/cache/cni-delguard/peers}/helm-$row/bin/helm
    [ -x "$bin" ] || "$repo/tools/install-peers.sh" helm >&2
    printf '%s\n' "$bin"
}
helm=${HELM:-$(pinned_helm)}

epoch=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null ||
    cat "$repo/tools/source-date-epoch")}
[[ $epoch =~ ^[0-9]+$ ]] || die "no commit time: export SOURCE_DATE_EPOCH"

python3 "$repo/tools/generate-chart.py" --check ||
    die "the chart's generated files are not current: run python3 tools/generate-chart.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "$image" ]; then
    [[ $image =~ ^([^@]+)@(sha256:[0-9a-f]{64})$ ]] || die "--image wants REPOSITORY@sha256:DIGEST"
    cp -a "$chart" "$tmp/cni-delguard"
    chart=$tmp/cni-delguard
    (cd "$repo" && python3 -m tools.release set-image --repository "${BASH_REMATCH[1]}" \
        --digest "${BASH_REMATCH[2]}" "$chart/values.yaml") || die "could not set the image"
fi
"$helm" lint --strict "$chart" --values "$chart/ci/watch-values.yaml" >&2 ||
    die "helm lint --strict failed"
mkdir -p "$out"
"$helm" package "$chart" --version "$version" --app-version "$app_version" --destination "$tmp" >&2
package=$tmp/cni-delguard-$version.tgz
[ -f "$package" ] || die "helm package made no $package"
(cd "$repo" && python3 -m tools.release normalize --epoch "$epoch" "$package")
mv -f "$package" "$out/"
printf '%s\n' "$out/cni-delguard-$version.tgz"
