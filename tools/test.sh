#!/usr/bin/env bash
# test.sh: the project's tests, on a fresh Debian bookworm machine, as root (network namespaces,
# a containerd of the tests' own). Installs what it needs (Debian packages, cnitool built from
# Debian's CNI source, the Python dev and freeze pins), builds the frozen bundle (the product the
# tests run), lints, then runs pytest with the integration suites (DELGUARD_INTEGRATION=1). Extra
# arguments go to pytest. The quick loop needs none of this: `python3 -m pytest` (README.md).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
cd "$repo"

[ "$(id -u)" -eq 0 ] || { echo "test.sh: run as root (network namespaces, containerd)" >&2; exit 1; }

# Debian's packages and what the suites build from them (tools/deps.tsv says what needs each).
tools/install-deps.sh test
# A Go that can build the peers: the machine's, else bookworm-backports' and a pinned toolchain.
go=$(tools/install-go.sh)
PATH=$(dirname "$go"):$PATH
# The real peers (multus, the runtimes, ...) of peers/pins.tsv, each built once and cached.
tools/install-peers.sh
# Debian's kubectl (trixie) for `kubectl kustomize` in the manifest tests, unpacked under .cache/,
# never installed: the machine may have another package named kubectl (Google's), which dpkg
# would replace.
KUBECTL=$(tools/unpack-deb.sh kubectl/trixie usr/bin/kubectl)
"$KUBECTL" version --client >/dev/null
export KUBECTL
# Debian's docker-registry (bookworm), the OCI registry the Helm chart is pushed to and installed
# from in its tests, unpacked under .cache/ (its service is never installed or started).
DOCKER_REGISTRY=$(tools/unpack-deb.sh docker-registry usr/bin/docker-registry)
export DOCKER_REGISTRY
# Debian trixie's cosign (2.5.0): the release's signatures, made and verified in the tests
# (tests/test_release.py, tests/e2e_cluster), unpacked under .cache/ like docker-registry.
COSIGN=$(tools/unpack-deb.sh cosign/trixie usr/bin/cosign)
export COSIGN
"$python" -m pip install --quiet --disable-pip-version-check -e '.[dev,freeze]'
tools/build.sh                  # this machine's arch: dist/cni-delguard/
[ "$(dpkg --print-architecture)" = arm64 ] ||
    tools/build.sh --arch arm64 # under qemu-user: dist/arm64/cni-delguard/ (tests/node_roots)

# Each node's runtime, kubelet and multus daemon watch files through inotify, and the lanes run
# a dozen nodes at once: the kernel's default of 128 inotify instances per user (all of root's
# here) ran out at about eleven kubelets ("too many open files": a runtime or a kubelet that
# does not start). Raised for the run, never lowered.
[ "$(sysctl -n fs.inotify.max_user_instances)" -ge 1024 ] ||
    sysctl -q -w fs.inotify.max_user_instances=1024

"$python" -m ruff check .
"$python" -m mypy

# Everything: a bare pytest skips the integration suites (tests/conftest.py), this runs them too.
export DELGUARD_INTEGRATION=1
# Everything was built above: a test that finds a bundle missing fails instead of skipping.
export CI=${CI:-1}
# README's runtime table is checked against this run's matrix (tests/test_readme_matrix.py runs
# last): the e2e suites write it afresh, no row of an earlier run may stand in for one not run.
rm -f "${DELGUARD_E2E_CACHE:-$repo/.cache/e2e}/matrix.json"
# The suites that mostly wait run side by side with the rest, each a pytest session of its own
# (tools/run-lanes.py says which); pytest's 5 (no test collected) fails a lane like any other
# non-zero. A selection of tests (tools/test.sh tests/unit -q) runs as one plain pytest.
PYTHON=$python exec "$python" tools/run-lanes.py "$@"
