#!/usr/bin/env bash
# install-e2e-deps.sh: everything tests/e2e_cri needs (besides the peers of tools/install-peers.sh), on a fresh Debian bookworm, as root.
# Idempotent; .ci/run calls it before the tests.
#
# - containerd 1.6.20 and runc from bookworm (the release that shows the deadlock in full),
#   Debian's reference CNI plugins, iproute2, and gcc + libc6-dev for the static pause program;
# - for CRI-O (a peer, tools/install-peers.sh): conmon 2.1.6 (CRI-O 1.36 asks 2.0.19 for sync and
#   2.1.2 for the global log size limit, internal/config/conmonmgr), libseccomp-dev and pkg-config
#   (its `seccomp` build tag links libseccomp through cgo), make (pinns, C, its own Makefile; the
#   static libc is libc6-dev's); podman loads the pause image into its storage;
# - grpcio / grpcio-tools / protobuf from PyPI, pinned, for the CRI client generated at test time;
# - the CRI api.proto from trixie's golang-github-kubernetes-cri-api-dev (tools/e2e-fetch-cri-proto.sh).
#
# containerd is installed, never started as a service: the tests run their own, by hand.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}

export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
# policy-rc.d 101 keeps the package's service from starting where an init system is running.
policy=/usr/sbin/policy-rc.d
created_policy=
if ! dpkg -s containerd >/dev/null 2>&1 && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    created_policy=1
fi
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    containerd runc containernetworking-plugins iproute2 util-linux gcc libc6-dev ca-certificates \
    conmon libseccomp-dev pkg-config make podman
if [ -n "$created_policy" ]; then rm -f "$policy"; fi

"$python" -m pip install -q --disable-pip-version-check \
    grpcio==1.85.1 grpcio-tools==1.85.1 protobuf==7.36.2

"$repo/tools/e2e-fetch-cri-proto.sh"

containerd --version
runc --version | head -n 1
