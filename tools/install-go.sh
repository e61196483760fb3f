#!/usr/bin/env bash
# install-go.sh: print the path of a `go` that can build the peers (peers/*/go.mod), bringing one
# when the machine has none. tools/test.sh puts its dir first on PATH before tools/install-peers.sh.
#
#   tools/install-go.sh            the go to use (stdout); what it did goes to stderr
#   tools/install-go.sh --need     only the version the peers need (go1.26.3, say)
#
# "Can build" means at least the highest `go` or `toolchain` line of the peers' modules: a go older
# than a module's line refuses it, or fetches a newer toolchain by itself behind the build's back.
# Tried in order, the first new enough wins:
#   1. the machine's go: $GO, each `go` on PATH, /usr/local/go/bin/go (the official tarball's);
#   2. bookworm-backports' golang, through tools/apt-private.sh (a private source list: the
#      machine's own apt sources are never edited): the golang-1.N-go that backports' golang-go
#      depends on, installed beside Debian's (/usr/lib/go-1.N; /usr/bin/go stays Debian's);
#   3. the toolchain pinned below, which the Go module proxy serves as the module
#      golang.org/toolchain: backports' go fetches it through GOTOOLCHAIN into the module cache,
#      verified against the checksum database like any module (GOSUMDB must not be off).
# Step 2 comes first because bookworm's own golang-go (1.19) predates GOTOOLCHAIN (Go 1.21).
# On a fresh bookworm today that is backports' 1.23.5, then the pinned toolchain (1.23.5 is below
# the peers' 1.26.3): tests/test_install_go.py shows it in a debootstrap root.
set -euo pipefail

# The toolchain of step 3: the Go the suite's peers are built with on the CI machine (go1.26.8,
# /usr/local/go there), so a fresh bookworm builds them with the same compiler. Raise it when a
# peer's go.mod needs more (this script says so).
PINNED=go1.26.8
# Where bookworm-backports' golang-go comes from (tools/apt-private.sh's suites).
BACKPORTS=bookworm-backports

repo=$(cd "$(dirname "$0")/.." && pwd)

log() { printf 'install-go: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# go1.26.3 -> 1.26.3; go1.21 and 1.21 -> 1.21.0 (a `go 1.21` line means Go 1.21.0); go1.21rc2 ->
# 1.21.0 (a release candidate counts as its release: good enough to compare with go.mod lines).
norm() { # VERSION
    local v=${1#go}
    v=${v%%[a-z]*}
    case "$v" in
        *.*.*) ;;
        *.*) v=$v.0 ;;
        *) v=$v.0.0 ;;
    esac
    printf '%s\n' "$v"
}

at_least() { # HAVE NEED: whether HAVE >= NEED
    [ "$(printf '%s\n%s\n' "$(norm "$2")" "$(norm "$1")" | sort -V | head -n1)" = "$(norm "$2")" ]
}

# The highest `go` or `toolchain` line of the peers' modules.
need() {
    local line v best=0.0.0
    while read -r line; do
        v=$(norm "${line##* }")
        at_least "$v" "$best" && best=$v
    done < <(cat "$repo"/peers/*/go.mod | grep -E '^(go|toolchain)[[:space:]]+(go)?[0-9]')
    printf 'go%s\n' "$best"
}

version_of() { # GO: its version (go1.26.8), or nothing when it does not run
    (cd / && GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || true
}

# 1. The machine's go.
machine() { # NEED
    local go v
    for go in ${GO:+"$GO"} $(type -aP go) /usr/local/go/bin/go; do
        [ -x "$go" ] || continue
        v=$(version_of "$go")
        if [ -n "$v" ] && at_least "$v" "$1"; then
            log "the machine's $go ($v) is new enough"
            printf '%s\n' "$go"
            return 0
        fi
        [ -z "$v" ] || log "$go is $v: older than $1"
    done
    return 1
}

# 2. bookworm-backports' golang: the versioned package its golang-go depends on.
backports() {
    local pkg go
    [ "$(id -u)" -eq 0 ] || die "no go new enough here; installing one from $BACKPORTS needs root"
    "$repo/tools/apt-private.sh" update >&2
    pkg=$("$repo/tools/apt-private.sh" apt-cache -t "$BACKPORTS" depends golang-go |
        grep -oE 'golang-1\.[0-9]+-go' | head -n1) ||
        die "$BACKPORTS has no golang-go depending on a golang-1.N-go"
    go=${pkg#golang-}
    go=/usr/lib/go-${go%-go}/bin/go # golang-1.23-go installs /usr/lib/go-1.23
    if [ ! -x "$go" ]; then
        log "installing $pkg from $BACKPORTS"
        DEBIAN_FRONTEND=noninteractive "$repo/tools/apt-private.sh" apt-get \
            -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
            -t "$BACKPORTS" "$pkg" >&2
    fi
    [ -x "$go" ] || die "$pkg did not install $go"
    printf '%s\n' "$go"
}

# 3. The pinned toolchain, fetched by a go that knows GOTOOLCHAIN (1.21 or later).
toolchain() { # BOOTSTRAP-GO
    local var root
    [ "$(GOTOOLCHAIN=local "$1" env GOSUMDB)" != off ] ||
        die "GOSUMDB=off: the toolchain is only fetched with the checksum database on"
    for var in GONOSUMDB GONOSUMCHECK GONOVERIFY GOINSECURE GOPRIVATE; do
        [ -z "$(GOTOOLCHAIN=local "$1" env "$var" 2>/dev/null)" ] ||
            die "$var is set: the toolchain must not skip checksum verification"
    done
    log "fetching $PINNED (golang.org/toolchain, from the module proxy) with $1"
    root=$(cd / && GOTOOLCHAIN=$PINNED "$1" env GOROOT) || die "GOTOOLCHAIN=$PINNED failed"
    [ "$(version_of "$root/bin/go")" = "$PINNED" ] || die "$root/bin/go is not $PINNED"
    printf '%s\n' "$root/bin/go"
}

main() {
    local want go v
    want=$(need)
    if [ "${1:-}" = --need ]; then
        printf '%s\n' "$want"
        return 0
    fi
    machine "$want" && return 0
    go=$(backports)
    v=$(version_of "$go")
    if at_least "$v" "$want"; then
        log "$go ($v, $BACKPORTS) is new enough"
        printf '%s\n' "$go"
        return 0
    fi
    log "$go is $v, the peers need $want"
    at_least "$PINNED" "$want" || die "the pinned $PINNED is older than the peers' $want: raise PINNED"
    toolchain "$go"
}

main "$@"
