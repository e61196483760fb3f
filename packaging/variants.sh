#!/usr/bin/env bash
# variants.sh: build the variants that packaging/README.md compares (into build/variants/, never
# dist/) and measure their skip-path DEL side by side with python -m benchmarks.compare.
#
# Usage: packaging/variants.sh [RUNS]
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
runs=${1:-30}
out=$repo/build/variants
cd "$repo"
export SOURCE_DATE_EPOCH PYTHONHASHSEED=0
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)

build() { # NAME SPEC-OPTIONS...
    local name=$1
    shift
    "$python" -m PyInstaller --noconfirm --log-level ERROR --workpath "$out/$name/work" \
        --distpath "$out/$name/dist" packaging/cni-delguard.spec -- "$@" >/dev/null
    echo "$name: $(du -sh "$out/$name/dist" | cut -f1)"
}

build onedir
build onedir-default-rthooks --default-runtime-hooks
build onedir-ctypes-hook --ctypes-hook
build onedir-archive --archive
build onedir-unstripped --no-strip
build onefile --onefile

exe=$out/%s/dist/cni-delguard/cni-delguard
"$python" -m benchmarks.compare --runs "$runs" \
    "onedir (the product)=$(printf "$exe" onedir)" \
    "onedir, default runtime hooks=$(printf "$exe" onedir-default-rthooks)" \
    "onedir, PyInstaller ctypes hook=$(printf "$exe" onedir-ctypes-hook)" \
    "onedir, PYZ archive=$(printf "$exe" onedir-archive)" \
    "onedir, unstripped=$(printf "$exe" onedir-unstripped)" \
    "onefile=$out/onefile/dist/cni-delguard"
