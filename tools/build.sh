#!/usr/bin/env bash
# build.sh: freeze cni-delguard into the one-folder bundle dist/cni-delguard/ (executable
# dist/cni-delguard/cni-delguard) with packaging/cni-delguard.spec, then smoke-test the frozen
# binary through a symlink from another directory, the way it sits in /opt/cni/bin.
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

# VERSION, then a DEL with no evidence: exit 0, nothing on stdout.
smoke_test() { # EXECUTABLE SCRATCH-DIR
    local exe=$1 tmp=$2 out rc
    mkdir -p "$tmp/bin" "$tmp/state"
    ln -s "$exe" "$tmp/bin/cni-delguard"

    out=$(cd "$tmp" && CNI_COMMAND=VERSION bin/cni-delguard </dev/null) || fail "VERSION exited $?"
    case $out in *supportedVersions*) ;; *) fail "VERSION printed: $out" ;; esac

    local conf
    conf='{"cniVersion":"1.0.0","name":"n","type":"cni-delguard","delegate":{"type":"bridge"},'
    conf+="\"stateDir\":\"$tmp/state\",\"logFile\":\"$tmp/log\"}"
    rc=0
    out=$(cd "$tmp" && printf '%s' "$conf" | CNI_COMMAND=DEL CNI_CONTAINERID=smoke-0123456789abcdef \
        CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni:/opt/cni/bin CNI_NETNS=/var/run/netns/none \
        PATH="$tmp/bin:$PATH" cni-delguard) || rc=$?
    [ "$rc" -eq 0 ] || fail "no-evidence DEL exited $rc: $out"
    [ -z "$out" ] || fail "no-evidence DEL printed on stdout: $out"
    echo "smoke test passed: VERSION, no-evidence DEL (exit 0, empty stdout)"
}

start=$(date +%s)
install_build_deps
mkdir -p build dist
stage=$(mktemp -d dist/.stage.XXXXXX)
work=$(mktemp -d build/work.XXXXXX)
trap 'rm -rf "$stage" "$work"' EXIT
freeze "$stage" "$work"
smoke_test "$repo/$stage/cni-delguard/cni-delguard" "$repo/$work/smoke"
install_bundle "$stage"
echo "built dist/cni-delguard in $(($(date +%s) - start)) s," \
    "$(du -sh dist/cni-delguard | cut -f1) on disk, $(find dist/cni-delguard -type f | wc -l) files"
