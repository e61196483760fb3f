#!/usr/bin/env bash
# variants.sh: build the variants that packaging/README.md compares (into build/variants/, never
# dist/), each made self-contained as the product is (selfcontain.py; not onefile, which unpacks
# itself), and measure their skip-path DEL side by side with python -m benchmarks.compare, beside
# the product in dist/ and Debian's bare python3.11.
#
# Usage: PYTHON=<the build root's Python> packaging/variants.sh [RUNS]
#   The build root's venv works from this machine when it is Debian bookworm too:
#   PYTHON=$(ls -d /var/cache/cni-delguard/venvs/amd64-*/bin/python | head -n 1)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
runs=${1:-30}
out=$repo/build/variants
cd "$repo"
export SOURCE_DATE_EPOCH PYTHONHASHSEED=0
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
mkdir -p "$out"
: >"$out/empty.py"

build() { # NAME SPEC-OPTIONS...
    local name=$1
    shift
    rm -rf "${out:?}/$name"
    "$python" -m PyInstaller --noconfirm --log-level ERROR --workpath "$out/$name/work" \
        --distpath "$out/$name/dist" packaging/cni-delguard.spec -- "$@" >/dev/null
    case " $* " in
        *" --onefile "*) ;;
        *) "$python" packaging/selfcontain.py "$out/$name/dist/cni-delguard" >/dev/null ;;
    esac
    echo "$name: $(du -sh "$out/$name/dist" | cut -f1)"
}

build onedir
build empty-entry --entry "$out/empty.py"
build pyinstaller-bootstrap --pyinstaller-bootstrap
build default-rthooks --default-runtime-hooks --pyinstaller-bootstrap
build archive --archive
build unstripped --no-strip
build onefile --onefile

exe=$out/%s/dist/cni-delguard/cni-delguard
"$python" -m benchmarks.compare --runs "$runs" \
    "onedir (the product's recipe)=$(printf "$exe" onedir)" \
    "dist/ (the product)=$repo/dist/cni-delguard/cni-delguard" \
    "empty entry (the bundle's floor)=$(printf "$exe" empty-entry)" \
    "PyInstaller's own bootstrap=$(printf "$exe" pyinstaller-bootstrap)" \
    "... and its default runtime hooks=$(printf "$exe" default-rthooks)" \
    "PYZ archive=$(printf "$exe" archive)" \
    "unstripped=$(printf "$exe" unstripped)" \
    "onefile=$out/onefile/dist/cni-delguard"
