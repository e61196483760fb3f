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

freeze() {
    export SOURCE_DATE_EPOCH
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
    export PYTHONHASHSEED=0
    rm -rf build/cni-delguard dist/cni-delguard
    "$python" -m PyInstaller --noconfirm --clean --log-level WARN \
        --workpath build --distpath dist packaging/cni-delguard.spec
}

fail() {
    echo "build.sh: smoke test failed: $*" >&2
    exit 1
}

# VERSION, then a DEL with no evidence: exit 0, nothing on stdout, nothing left but the log.
smoke_test() {
    local exe=$repo/dist/cni-delguard/cni-delguard tmp out rc
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
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
freeze
smoke_test
echo "built dist/cni-delguard in $(($(date +%s) - start)) s," \
    "$(du -sh dist/cni-delguard | cut -f1) on disk, $(find dist/cni-delguard -type f | wc -l) files"
