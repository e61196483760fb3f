#!/usr/bin/env bash
# install-peers.sh: build the real peers the suites run against (peers/pins.tsv), each once.
#
#   tools/install-peers.sh            every row of peers/pins.tsv
#   tools/install-peers.sh multus     only the rows of that name
#   tools/install-peers.sh containerd-v1.7.22   only that row
#
# Each row is built into a cache keyed by its name and version:
#   ${DELGUARD_PEERS_CACHE:-/var/cache/cni-delguard/peers}/<name>-<version>/bin/<command>
# beside `recipe`: the row and the digest of its module's go.mod and go.sum. A dir whose recipe
# matches is not built again (a warm run takes well under a second); one whose recipe differs
# (new tags, a new go.sum) is built again in a temp dir and swapped in. Builds are serialized by
# a lock in the cache, so two runs at once never build one row twice or see half a dir.
#
# A row is built from its module, peers/<name>-<version>/ (pins.tsv says why): `go install tool`
# with -mod=readonly, the module proxy as the machine sets it, and the checksum database on
# (GOSUMDB must not be off; no GONOSUMDB, GONOSUMCHECK, GONOVERIFY, GOINSECURE or GOPRIVATE may
# exempt a module). Nothing built is committed, and no source of theirs enters the repository.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
pins=$repo/peers/pins.tsv
cache=${DELGUARD_PEERS_CACHE:-/var/cache/cni-delguard/peers}

log() { printf 'install-peers: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The rows of pins.tsv, comments and blank lines dropped, fields joined by one tab.
rows() {
    awk 'BEGIN {OFS = "\t"} !/^[[:space:]]*(#|$)/ {$1 = $1; print}' "$pins"
}

check_go() {
    command -v go >/dev/null || die "no go on PATH: tools/install-go.sh prints one that can"
    local v need var
    v=$(GOTOOLCHAIN=local go env GOVERSION)
    need=$("$repo/tools/install-go.sh" --need) # the highest go line of the peers' modules
    [ "$(printf '%s\n' "${need#go}" "${v#go}" | sort -V | head -n1)" = "${need#go}" ] ||
        die "$(command -v go) is $v: the peers need $need or later (tools/install-go.sh prints one)"
    [ "$(go env GOSUMDB)" != off ] || die "GOSUMDB=off: the peers are only built with the checksum database on"
    for var in GONOSUMDB GONOSUMCHECK GONOVERIFY GOINSECURE GOPRIVATE; do
        [ -z "$(go env "$var" 2>/dev/null)" ] || die "$var is set: no module may skip checksum verification"
    done
}

# What a row's cache dir was built from: the row itself and its module's digest.
recipe() { # line module-dir
    printf '%s\n' "$1"
    (cd "$2" && sha256sum go.mod go.sum)
}

build() { # tmp module-dir version tags env stamp commands source
    local tmp=$1 module=$2 version=$3 tags=$4 env=$5 stamp=$6 commands=$7 source=$8 cmd x ldflags=
    local -a extra=() tagargs=() stamps=()
    [ "$env" = - ] || IFS=, read -r -a extra <<<"$env"
    [ "$tags" = - ] || tagargs=(-tags "$tags")
    [ "$stamp" = - ] || IFS=, read -r -a stamps <<<"$stamp"
    for x in "${stamps[@]}"; do ldflags+=" -X ${x//%v/$version}"; done
    log "go install tool in ${module#"$repo"/} ${tagargs[*]}${ldflags}"
    (cd "$module" && env "${extra[@]}" GOBIN="$tmp/bin" GOFLAGS="-mod=readonly -trimpath -buildvcs=false" \
        go install "${tagargs[@]}" -ldflags="${ldflags# }" tool)
    IFS=, read -r -a cmds <<<"$commands"
    for cmd in "${cmds[@]}"; do
        case "$cmd" in
            *=make:*) make_c "$tmp" "$module" "$source" "${cmd%%=*}" "${cmd#*=make:}" ;;
        esac
        cmd=${cmd%%=*}
        [ -x "$tmp/bin/$cmd" ] || die "the build of ${module#"$repo"/} made no bin/$cmd"
    done
}

# The second recipe: a command of the peer written in C (CRI-O's pinns), built with its own
# Makefile from the peer's module source as `go mod download` fetched it and verified it against
# our module's go.sum (GOFLAGS=-mod=readonly: no other version). The source is copied into the
# build's temp dir (the module cache is read-only) and never into the repository.
make_c() { # tmp module-dir source command dir
    local tmp=$1 module=$2 source=$3 cmd=$4 sub=$5 dir
    dir=$(cd "$module" && GOFLAGS=-mod=readonly go mod download "$source" &&
        GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$source")
    [ -d "$dir/$sub" ] || die "$source has no $sub/ to build $cmd from"
    log "make -C $sub (from $source, verified by go.sum) for $cmd"
    mkdir -p "$tmp/src"
    cp -R "$dir/$sub" "$tmp/src/$sub"
    chmod -R u+w "$tmp/src"
    make -s -C "$tmp/src/$sub" >&2
    # Its Makefile puts the binary beside the dir (pinns: ../bin/pinns) or in it.
    for x in "$tmp/src/bin/$cmd" "$tmp/src/$sub/$cmd"; do
        if [ -x "$x" ]; then mv "$x" "$tmp/bin/$cmd"; break; fi
    done
    rm -rf "$tmp/src"
}

install_row() { # line
    local line=$1 name version source commands tags env stamp
    IFS=$'\t' read -r name version source commands tags env stamp <<<"$line"
    [ -n "${stamp:-}" ] || die "pins.tsv: row '$name $version' has fewer than 7 fields"
    local module=$repo/peers/$name-$version dest=$cache/$name-$version want
    [ -f "$module/go.mod" ] || die "pins.tsv: row '$name $version' has no module at ${module#"$repo"/}"
    want=$(recipe "$line" "$module")
    if [ -f "$dest/recipe" ] && [ "$(cat "$dest/recipe")" = "$want" ]; then
        return 0
    fi
    [ -n "$go_checked" ] || { check_go; go_checked=1; }
    local started=$SECONDS
    tmp=$(mktemp -d "$cache/.build-$name-$version.XXXXXX")
    build "$tmp" "$module" "$version" "$tags" "$env" "$stamp" "$commands" "$source"
    printf '%s\n' "$want" >"$tmp/recipe"
    if [ -e "$dest" ]; then
        mv "$dest" "$dest.old.$$"
        rm -rf "$dest.old.$$"
    fi
    mv "$tmp" "$dest"
    tmp=
    log "$name $version built in $((SECONDS - started)) s: $dest"
}

go_checked=
tmp= # the build under way: a failed build leaves nothing behind
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT
main() {
    [ -f "$pins" ] || die "no $pins"
    mkdir -p "$cache"
    exec 9>"$cache/.lock"
    flock 9
    local line name version w
    local -a seen=()
    while IFS= read -r line; do
        name=${line%%$'\t'*}
        version=${line#*$'\t'}
        version=${version%%$'\t'*}
        if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qxF -e "$name" -e "$name-$version"; then
            continue
        fi
        seen+=("$name" "$name-$version")
        install_row "$line"
    done < <(rows)
    for w in "$@"; do
        printf '%s\n' "${seen[@]}" | grep -qxF "$w" || die "no row named $w in $pins"
    done
}

main "$@"
