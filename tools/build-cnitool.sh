#!/usr/bin/env bash
# build-cnitool.sh: build cnitool from Debian's source package of the CNI library, once, and print
# the path of the binary.
#
# Debian ships the CNI library as golang-github-appc-cni-dev (source package golang-github-appc-cni,
# upstream github.com/containernetworking/cni 1.1.2 in trixie) but excludes cnitool from the binary
# package (DH_GOLANG_EXCLUDES in its debian/rules). cnitool needs nothing beyond the library itself
# and Go's standard library (its go.mod requires ginkgo/gomega for tests only), so it builds in
# GOPATH mode (GO111MODULE=off, GOPROXY=off) with Debian's Go and nothing downloaded but the
# source package, fetched through tools/apt-private.sh (apt verifies it against the signed Sources
# index; dpkg-source applies Debian's patches).
#
# Output: <cache>/cnitool, where <cache> is $CNITOOL_CACHE_DIR or <repo>/.cache/cnitool. A stamp
# file beside it records the source version and the Go used; when both match, a second run only
# prints the path. Runs under flock, so parallel callers build once.
#
# Needs: golang-go (>= 1.14; bookworm's 1.19 is enough), dpkg-dev (dpkg-source), xz-utils.
# Note: this cnitool hard-codes its cache dir to /var/lib/cni (libcni.CacheDir; no env var or
# flag changes it) and has only add/check/del.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${CNITOOL_CACHE_DIR:-$repo/.cache/cnitool}
src_pkg=golang-github-appc-cni
suite=trixie
want_upstream=1.1.2
import_path=github.com/containernetworking/cni

log() { printf 'build-cnitool: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

command -v go >/dev/null || die "go not found: install golang-go (tools/install-deps.sh demo)"
command -v dpkg-source >/dev/null || die "dpkg-source not found: install dpkg-dev"

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

stamp_text() { printf 'source=%s\ngo=%s\n' "$1" "$(go env GOVERSION)"; }

# Fast path: binary present and stamped with the Go in use (the source version is checked on the
# slow path only, so no apt call is needed here).
if [ -x "$cache/cnitool" ] && [ -f "$cache/stamp" ] &&
    grep -qx "go=$(go env GOVERSION)" "$cache/stamp"; then
    printf '%s\n' "$cache/cnitool"
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/build-cnitool.XXXXXX")
trap 'rm -rf "$work"' EXIT

fetch_source() {
    local apt=("$repo/tools/apt-private.sh")
    # Refresh the private index only when it does not know the source package yet.
    if ! "${apt[@]}" apt-cache showsrc "$src_pkg" 2>/dev/null | grep -q "^Package: $src_pkg\$"; then
        log "updating the private apt index"
        "${apt[@]}" update
    fi
    log "fetching source package $src_pkg/$suite"
    (cd "$work" && "${apt[@]}" apt-get -qq -o APT::Sandbox::User=root \
        source --download-only "$src_pkg/$suite" >/dev/null)
}

unpack_source() {
    local dsc version
    dsc=$(find "$work" -maxdepth 1 -name "${src_pkg}_*.dsc" | head -n1)
    [ -n "$dsc" ] || die "no .dsc downloaded for $src_pkg"
    version=$(sed -n 's/^Version: //p' "$dsc")
    case "$version" in
        "$want_upstream"-*) ;;
        *) die "$src_pkg $version in $suite: expected upstream $want_upstream" ;;
    esac
    mkdir -p "$work/gopath/src/$(dirname "$import_path")"
    # dpkg-source checks the tarballs against the .dsc (whose hash apt checked against the signed
    # index); it cannot check the uploader's key without debian-keyring, so keep its chatter for errors.
    dpkg-source -x "$dsc" "$work/gopath/src/$import_path" >"$work/dpkg-source.log" 2>&1 ||
        { cat "$work/dpkg-source.log" >&2; die "dpkg-source failed"; }
    printf '%s\n' "$version"
}

build() {
    log "building cnitool with $(go env GOVERSION)"
    (cd "$work/gopath/src/$import_path" &&
        env GOPATH="$work/gopath" GO111MODULE=off GOPROXY=off GOFLAGS= GOTOOLCHAIN=local \
            CGO_ENABLED=0 GOCACHE="$work/gocache" \
            go build -trimpath -o "$cache/cnitool.tmp" "./cnitool")
    mv -f "$cache/cnitool.tmp" "$cache/cnitool"
}

fetch_source
version=$(unpack_source)
build
stamp_text "$version" >"$cache/stamp"
log "built from $src_pkg $version"
printf '%s\n' "$cache/cnitool"
