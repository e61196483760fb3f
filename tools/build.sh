#!/usr/bin/env bash
# build.sh: freeze cni-delguard into a self-contained one-folder bundle and smoke-test it.
#
#   tools/build.sh                 this machine's arch: dist/cni-delguard/ (dist/cni-delguard/cni-delguard)
#   tools/build.sh --arch arm64    another arch, under qemu-user: dist/arm64/cni-delguard/
#   tools/build.sh --here          with this environment's Python ($PYTHON, default python3), no
#                                  build root: what the Dockerfile's build stage and the build
#                                  root itself run; --out DIR puts the bundle there, not in dist/
#   tools/build.sh --pins-only     only install the pins into $PYTHON's environment (a layer of
#                                  the Dockerfile of its own)
#   tools/build.sh --root-template [--arch ARCH]   print the build root's path (made if missing):
#                                  tools/build-image.sh's base image
#
# One recipe for every arch, the arch being data: the build runs in a Debian bookworm root of the
# target arch (tools/make-root.sh: debootstrap, cached), never in this machine's own Python:
# Debian's python3.11 and libpython3.11 (built with PGO and LTO), the pins of pyproject.toml at the
# exact versions and sha256 digests of packaging/requirements.txt in a venv cached per arch and
# pins, PyInstaller with packaging/cni-delguard.spec, then
# packaging/selfcontain.py: the bundle's own loader and C library (the build root's glibc 2.36)
# and a static launcher, so it needs nothing from the host that runs it. A foreign arch's root
# runs under qemu-user-static through binfmt_misc (tools/binfmt.sh). The mounts it needs
# (an overlay on the root, /proc, the venv) live in a private mount namespace: they vanish with
# it, whatever happens to the build. Needs root.
#
# The smoke test, in the build root: VERSION and a DEL with no evidence, chrooted into a root that
# holds nothing but the bundle (no loader, no C library, no shell, no /proc), through a symlink.
#
# Reproducible: SOURCE_DATE_EPOCH is the last commit's time and PYTHONHASHSEED=0; two builds of
# one tree in one build root give the same bytes. So a finished bundle is cached, keyed by every
# input (the sources, the build scripts, the root, the pins, the commit time): a second build of
# the same tree takes seconds (--no-cache builds it all the same). Cache: $DELGUARD_CACHE_DIR
# (default /var/cache/cni-delguard).
#
# No git checkout needed: from a source tarball (`git archive`) the inputs are the files of
# INPUTS on disk, less what .gitignore keeps out of git (EXCLUDED), and the commit time is
# tools/source-date-epoch, which `git archive` fills in (export-subst, .gitattributes); an
# exported SOURCE_DATE_EPOCH wins over both. A tarball of a commit builds the bundle a checkout
# of it builds, byte for byte (tests/test_build_from_archive.py).
#
# Several people and test runs share one work tree: each build works in a dir of its own, and the
# new bundle replaces dist's in two renames once it passed the smoke test, so a failed build
# never replaces a working bundle and tests running meanwhile never find none.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
cache=${DELGUARD_CACHE_DIR:-/var/cache/cni-delguard}
host_arch=$(dpkg --print-architecture)
# What the build root holds besides debootstrap's minbase (the arch comes from the root itself).
# containernetworking-plugins is not for the build: the same root is the Debian node of another
# arch that tests/node_roots installs into (one debootstrap under qemu-user fewer).
ROOT_PACKAGES=(python3.11 python3.11-venv libpython3.11 binutils gcc libc6-dev
    containernetworking-plugins)
# What goes into a build: its cache key digests these (git ls-files: tracked and untracked).
INPUTS=(pyproject.toml LICENSE cni_delguard packaging tools/build.sh tools/make-root.sh)
# Without git, what .gitignore keeps out of INPUTS (its patterns that can match there).
EXCLUDED=(__pycache__ '*.pyc' '*.egg-info')

# Scratch dirs, removed on exit (never across a mount: every mount is in the namespace, gone).
cleanup=()
trap 'rm -rf --one-file-system "${cleanup[@]}"' EXIT
usage() { echo "usage: tools/build.sh [--arch ARCH | --here [--out DIR]] [--no-cache]" >&2; exit 2; }
log() { printf 'build.sh: %s\n' "$*" >&2; }
fail() { log "smoke test failed: $*"; exit 1; }

if [ "${1:-}" = --in-namespace ]; then
    shift
    in_namespace_args=("$@")
    set --
fi
arch=$host_arch here="" out="" only="" no_cache=""
while [ $# -gt 0 ]; do
    case $1 in
        --arch) arch=${2:?--arch needs an arch (amd64, arm64)}; shift 2 ;;
        --here) here=1; shift ;;
        --no-cache) no_cache=1; shift ;;
        --out) out=${2:?--out needs a dir}; shift 2 ;;
        --pins-only | --root-template) only=$1; shift ;;
        *) usage ;;
    esac
done
case $arch in amd64 | arm64) ;; *) log "unknown arch $arch (amd64, arm64)"; exit 2 ;; esac
[ -z "$out" ] || [ -n "$here" ] || usage

pinned_requirements() {
    "$python" - <<'PY'
import tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
for req in project["dependencies"] + project["optional-dependencies"]["freeze"]:
    print(req)
PY
}

# VERSION, then a DEL with no evidence: exit 0, nothing on stdout, a skip logged. Run as the
# runtime would run it on a host with nothing the bundle could lean on: as root, chrooted into a
# root that holds only the bundle, reached through a symlink. Not as root, the same checks run
# from this machine's view, and say so.
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
    # The log goes under /tmp, which the guard allows only when the node's admin says so: the
    # settings file beside the plugin, as on a node (cni_delguard/guard/paths.py).
    printf 'log %s/tmp\n' "$top" >"$root/bin/cni-delguard.paths"
    chmod 0644 "$root/bin/cni-delguard.paths"

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
    log "smoke test passed $where: VERSION, no-evidence DEL (exit 0, empty stdout, logged)"
}

# Exactly the files whose sha256 packaging/requirements.txt lists (--require-hashes: anything
# else, a changed file on the index included, is refused), then a check that they meet
# pyproject.toml's requirements and each other's (pip check).
install_pins() {
    "$python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
        -r packaging/requirements.txt
    pinned_requirements | "$python" -c '
import sys
from importlib.metadata import PackageNotFoundError, version
from packaging.requirements import Requirement
bad = []
for line in filter(None, map(str.strip, sys.stdin)):
    req = Requirement(line)
    try:
        found = version(req.name)
    except PackageNotFoundError:
        found = None
    if found is None or not req.specifier.contains(found, prereleases=True):
        bad.append(f"{req} (requirements.txt gives {found})")
if bad:
    sys.exit("build.sh: packaging/requirements.txt does not meet pyproject.toml: " + "; ".join(bad))
'
    "$python" -m pip check --disable-pip-version-check >/dev/null
}

root_template() {
    tools/make-root.sh bookworm "$arch" "${ROOT_PACKAGES[@]}"
}

# --here: pins, PyInstaller, selfcontain, smoke test, with this environment's Python.
freeze_here() { # OUT-DIR (gets cni-delguard/)
    local work
    install_pins
    work=$(mktemp -d "${TMPDIR:-/tmp}/delguard-build.XXXXXX")
    cleanup+=("$work")
    SOURCE_DATE_EPOCH=$(source_date_epoch) \
        PYTHONHASHSEED=0 "$python" -m PyInstaller --noconfirm --clean --log-level WARN \
        --workpath "$work/pyinstaller" --distpath "$work/dist" packaging/cni-delguard.spec
    "$python" packaging/selfcontain.py "$work/dist/cni-delguard"
    smoke_test "$work/dist/cni-delguard" "$work/smoke"
    rm -rf "$1/cni-delguard"
    mkdir -p "$1"
    mv "$work/dist/cni-delguard" "$1/cni-delguard"
}

# Whether this tree is a git checkout of its own (not a tarball unpacked inside another repo).
in_git() {
    [ "$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null)" = "$repo" ]
}

# The files of INPUTS, NUL-separated: what the cache key digests is what the build root gets.
input_files() {
    if in_git; then
        git ls-files -z --cached --others --exclude-standard -- "${INPUTS[@]}"
        return
    fi
    local prune=() pattern
    for pattern in "${EXCLUDED[@]}"; do prune+=(-name "$pattern" -prune -o); done
    find "${INPUTS[@]}" "${prune[@]}" -type f -print0
}

# The commit time: exported, the last commit's, or the one `git archive` wrote into the tarball.
source_date_epoch() {
    local stamp
    if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
        printf '%s\n' "$SOURCE_DATE_EPOCH"
    elif in_git; then
        git -C "$repo" log -1 --format=%ct
    elif stamp=$(cat "$repo/tools/source-date-epoch" 2>/dev/null) && [[ $stamp =~ ^[0-9]+$ ]]; then
        printf '%s\n' "$stamp"
    else
        log "no commit time: not a git checkout, and tools/source-date-epoch was not filled in by" \
            "git archive; export SOURCE_DATE_EPOCH"
        exit 1
    fi
}

# The digest of every input of a build in a given root: the cache key of its bundle.
build_key() { # ROOT-TEMPLATE
    {
        printf 'root=%s\nepoch=%s\n' "$1" "$SOURCE_DATE_EPOCH"
        pinned_requirements
        input_files | sort -z | xargs -0 sha256sum
    } | sha256sum | cut -c1-16
}

# In a private mount namespace (unshare runs this script again with --in-namespace): an overlay
# on the build root, /proc, the cached venv at /venv and the sources at /src; then this script's
# --here inside it, writing the bundle to /out (OUT-DIR).
in_namespace() { # TEMPLATE WORK VENV OUT-DIR
    local template=$1 work=$2 venv=$3 outdir=$4 root=$2/root
    mkdir -p "$work/upper" "$work/scratch" "$root"
    mount -t overlay overlay -o "lowerdir=$template,upperdir=$work/upper,workdir=$work/scratch" "$root"
    mount -t proc proc "$root/proc"
    mkdir -p "$root/venv" "$root/out" "$root/src"
    mount --bind "$venv" "$root/venv"
    mount --bind "$outdir" "$root/out"
    input_files | xargs -0 cp --parents -t "$root/src"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    cp "${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" "$root/etc/delguard-build-ca.crt"
    local env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
        PIP_CERT=/etc/delguard-build-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1
        SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH")
    if [ ! -e "$venv/.complete" ]; then
        chroot "$root" "${env[@]}" python3.11 -m venv --clear /venv
        touch "$venv/.complete"
    fi
    chroot "$root" "${env[@]}" PYTHON=/venv/bin/python TMPDIR=/tmp \
        sh -c 'cd /src && tools/build.sh --here --out /out'
}

# Default: the bundle for ARCH from its build root (or the cache), into STAGE-DIR/cni-delguard.
freeze_in_root() { # STAGE-DIR
    [ "$(id -u)" -eq 0 ] || {
        log "needs root (a chroot build root); tools/build.sh --here builds with this machine's Python"
        exit 1
    }
    local template key bundles venv work
    template=$(root_template)
    export SOURCE_DATE_EPOCH
    SOURCE_DATE_EPOCH=$(source_date_epoch)
    key=$(build_key "$template")
    bundles=$cache/bundles/$arch-$key
    if [ -z "$no_cache" ] && [ -f "$bundles/.complete" ]; then
        log "cached: the same inputs were built before ($bundles)"
        cp -a "$bundles/cni-delguard" "$1/"
        return
    fi
    venv=$cache/venvs/$arch-$( (basename "$template"; pinned_requirements; cat packaging/requirements.txt) |
        sha256sum | cut -c1-12)
    mkdir -p "$venv" "$cache/bundles"
    work=$(mktemp -d "$repo/build/root.XXXXXX")
    cleanup+=("$work")
    mkdir "$work/out"
    unshare --mount --propagation private -- "$0" --in-namespace "$template" "$work" "$venv" \
        "$work/out"
    local new
    if [ -n "$no_cache" ]; then
        cp -a "$work/out/cni-delguard" "$1/"
        return
    fi
    new=$(mktemp -d "$cache/bundles/.new.XXXXXX")
    cp -a "$work/out/cni-delguard" "$new/"
    touch "$new/.complete"
    rm -rf "$bundles"  # an incomplete one; a complete one of a build that ran alongside: the same
    mv -T "$new" "$bundles" 2>/dev/null || rm -rf "$new"
    # Keep the last few bundles of each arch, not every commit's.
    ls -1dt "$cache/bundles/$arch-"* 2>/dev/null | tail -n +6 | xargs -r rm -rf
    cp -a "$bundles/cni-delguard" "$1/"
}

# Put the staged bundle in place of DEST (two renames), then drop the old one.
install_bundle() { # STAGE-DIR DEST
    local old=""
    mkdir -p "$(dirname "$2")"
    if [ -e "$2" ]; then
        old=$(mktemp -d "$(dirname "$2")/.old.XXXXXX")
        mv "$2" "$old/"
    fi
    mv "$1/cni-delguard" "$2"
    [ -z "$old" ] || rm -rf "$old"
}

if [ -n "${in_namespace_args+set}" ]; then
    in_namespace "${in_namespace_args[@]}"
    exit 0
fi

case $only in
    --pins-only) install_pins; exit 0 ;;
    --root-template) root_template; exit 0 ;;
esac
start=$SECONDS
if [ -n "$here" ] && [ -n "$out" ]; then
    freeze_here "$out"
    exit 0
fi
dest=dist/cni-delguard
[ "$arch" = "$host_arch" ] || dest=dist/$arch/cni-delguard
mkdir -p build dist
stage=$(mktemp -d dist/.stage.XXXXXX)
cleanup+=("$stage")
if [ -n "$here" ]; then
    [ "$arch" = "$host_arch" ] || { log "--here builds this machine's arch only"; exit 2; }
    freeze_here "$stage"
else
    freeze_in_root "$stage"
fi
install_bundle "$stage" "$dest"
log "built $dest ($arch) in $((SECONDS - start)) s, $(du -sh "$dest" | cut -f1) on disk," \
    "$(find "$dest" -type f | wc -l) files"
