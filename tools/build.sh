#!/usr/bin/env bash
# build.sh: freeze cni-delguard into the one-folder bundle dist/cni-delguard/ (executable
# dist/cni-delguard/cni-delguard) with packaging/cni-delguard.spec, make it need nothing from the
# host's userland (packaging/selfcontain.py: its own loader and C library, a static launcher),
# then smoke-test it through a symlink, as root in a root that holds nothing but the bundle.
#
# Needs (besides the Python pins): gcc and libc6-dev (the static launcher), binutils (readelf).
#
# Usage: tools/build.sh            (from anywhere; PYTHON=python3.11 to pick the interpreter)
#
# Reproducible: SOURCE_DATE_EPOCH is the last commit's time and PYTHONHASHSEED=0, so two builds of
# one commit with the same interpreter and pins give the same bundle. Build dependencies are the
# pins in pyproject.toml (the runtime dependencies and the `freeze` extra); pip is asked only for
# what is missing or at another version.
#
# Several people and test runs share one work tree: each build works in a dir of its own, the new
# bundle is smoke-tested before it replaces dist/cni-delguard, and the replacement is two renames,
# so a failed build never replaces a working bundle and tests running meanwhile never find none.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
cd "$repo"

pinned_requirements() {
    "$python" - <<'PY'
import tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
for req in project["dependencies"] + project["optional-dependencies"]["freeze"]:
    print(req)
PY
}

install_build_deps() {
    local reqs
    mapfile -t reqs < <(pinned_requirements)
    "$python" -m pip install --quiet --disable-pip-version-check "${reqs[@]}"
}

freeze() { # STAGE-DIR WORK-DIR
    export SOURCE_DATE_EPOCH
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
    export PYTHONHASHSEED=0
    "$python" -m PyInstaller --noconfirm --clean --log-level WARN \
        --workpath "$2" --distpath "$1" packaging/cni-delguard.spec
}

# Put the staged bundle in place of dist/cni-delguard (two renames), then drop the old one.
install_bundle() { # STAGE-DIR
    local old=""
    if [ -e dist/cni-delguard ]; then
        old=$(mktemp -d dist/.old.XXXXXX)
        mv dist/cni-delguard "$old/"
    fi
    mv "$1/cni-delguard" dist/cni-delguard
    [ -z "$old" ] || rm -rf "$old"
}

fail() {
    echo "build.sh: smoke test failed: $*" >&2
    exit 1
}

# VERSION, then a DEL with no evidence: exit 0, nothing on stdout. Run as the runtime would run it
# on a host that has nothing the bundle could lean on: as root, chrooted into a root that holds only
# the bundle (no C library, no loader, no shell, no /proc), reached through a symlink. Not as root,
# the same checks run from this machine's view, and say so.
smoke_test() { # BUNDLE-DIR SCRATCH-DIR
    local root=$2/root top="" run=() out rc conf where="in an empty root"
    mkdir -p "$root/bin" "$root/tmp"
    mkdir -m 0700 "$root/state"
    cp -a "$1" "$root/bundle"
    ln -s ../bundle/cni-delguard "$root/bin/cni-delguard"
    if [ "$(id -u)" -eq 0 ]; then
        run=("$(command -v chroot)" "$root")
    else
        top=$root
        where="from this machine's view (not root: no chroot)"
    fi

    out=$(env -i CNI_COMMAND=VERSION "${run[@]}" "$top/bin/cni-delguard" </dev/null) ||
        fail "VERSION exited $?: $out"
    case $out in *supportedVersions*) ;; *) fail "VERSION printed: $out" ;; esac

    conf='{"cniVersion":"1.0.0","name":"n","type":"cni-delguard","delegate":{"type":"bridge"},'
    conf+="\"stateDir\":\"$top/state\",\"logFile\":\"$top/tmp/log\"}"
    rc=0
    out=$(printf '%s' "$conf" | env -i CNI_COMMAND=DEL CNI_CONTAINERID=smoke-0123456789abcdef \
        CNI_IFNAME=eth0 CNI_PATH="$top/bin" CNI_NETNS=/var/run/netns/none \
        "${run[@]}" "$top/bin/cni-delguard") || rc=$?
    [ "$rc" -eq 0 ] || fail "no-evidence DEL exited $rc: $out"
    [ -z "$out" ] || fail "no-evidence DEL printed on stdout: $out"
    grep -q '"decision": "skip"' "$root/tmp/log" || fail "no-evidence DEL logged no skip"
    echo "smoke test passed $where: VERSION, no-evidence DEL (exit 0, empty stdout, logged)"
}

start=$(date +%s)
install_build_deps
mkdir -p build dist
stage=$(mktemp -d dist/.stage.XXXXXX)
work=$(mktemp -d build/work.XXXXXX)
trap 'rm -rf "$stage" "$work"' EXIT
freeze "$stage" "$work"
"$python" packaging/selfcontain.py "$stage/cni-delguard"
smoke_test "$repo/$stage/cni-delguard" "$repo/$work/smoke"
install_bundle "$stage"
echo "built dist/cni-delguard in $(($(date +%s) - start)) s," \
    "$(du -sh dist/cni-delguard | cut -f1) on disk, $(find dist/cni-delguard -type f | wc -l) files"
