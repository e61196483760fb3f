#!/usr/bin/env bash
# install-test-deps.sh: install, as root on Debian bookworm, what the real-parts tests need from
# Debian, then build cnitool (tools/build-cnitool.sh). Idempotent: when every package is already
# installed it skips apt entirely (no `apt-get update`), and cnitool's build is cached, so a second
# run takes well under a second.
#
#   containernetworking-plugins  the reference plugins (bridge, host-local, portmap, tuning, ...)
#   iproute2, iptables           ip netns, links; the bridge's masquerade and portmap's rules
#   util-linux                   unshare(1): cnitool runs in a private mount namespace
#   golang-go, dpkg-dev, xz-utils  build cnitool from Debian's source package (and the static
#                                fake delegate, tests/fakes/static_delegate)
#   hyperfine                    the benchmarks
#   python3.11, libpython3.11-dev  the benchmarks' interpreter floors: Debian's python3.11 started
#                                bare, and the bundle's own libpython (benchmarks/pyfloor.c)
#   gcc, libc6-dev, binutils     tools/build.sh: the static launcher, readelf (packaging/)
#   debootstrap                  node roots of other distributions (tools/make-root.sh)
#   busybox-static               a shell for fake node roots the installer runs the plugin in
#   qemu-user-static, binfmt-support  the arm64 build and node root under emulation
#                                (tools/binfmt.sh, which installs them itself when run alone)
#   prometheus                   promtool (check rules/metrics, rule unit tests) and the server the
#                                metrics test scrapes the watcher with (its own config, port and
#                                data dir on loopback; the package's own service is kept off)
#
# Then the node roots the tests install into: Debian bullseye (glibc 2.31) with its own
# containernetworking-plugins (tools/make-root.sh, cached across runs in /var/cache/cni-delguard).
#
# Environment: CNITOOL_CACHE_DIR (see tools/build-cnitool.sh).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
packages=(
    containernetworking-plugins
    iproute2
    iptables
    util-linux
    golang-go
    dpkg-dev
    xz-utils
    hyperfine
    python3.11
    libpython3.11-dev
    gcc
    libc6-dev
    binutils
    debootstrap
    busybox-static
    qemu-user-static
    binfmt-support
    prometheus
    openssl
)

log() { printf 'install-test-deps: %s\n' "$*" >&2; }

[ "$(id -u)" -eq 0 ] || { log "must run as root"; exit 1; }

missing() {
    local p
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed ||
            printf '%s\n' "$p"
    done
}

mapfile -t todo < <(missing)
if [ "${#todo[@]}" -gt 0 ]; then
    log "installing: ${todo[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${todo[@]}" >/dev/null
    if printf '%s\n' "${todo[@]}" | grep -qx prometheus; then
        # The tests start their own server; the package's service must not run beside them.
        if [ -d /run/systemd/system ]; then
            systemctl disable --now prometheus.service >/dev/null 2>&1 || true
        elif [ -x /etc/init.d/prometheus ]; then
            /etc/init.d/prometheus stop >/dev/null 2>&1 || true
            update-rc.d prometheus disable >/dev/null 2>&1 || true
        fi
    fi
else
    log "all Debian packages present"
fi

# cnitool's cache dir is hard-coded to /var/lib/cni; the tests bind-mount a private dir over it in
# a private mount namespace, which needs the mount point to exist.
mkdir -p /var/lib/cni

"$repo/tools/build-cnitool.sh"
"$repo/tools/make-root.sh" bullseye "$(dpkg --print-architecture)" containernetworking-plugins >/dev/null
