#!/usr/bin/env bash
# install-deps.sh GROUP...: install, as root on Debian bookworm, the Debian packages of the groups
# (tools/deps.tsv: each package, the groups that need it and why), then what the group needs
# besides them:
#   demo   /var/lib/cni (cnitool binds a private dir over it) and cnitool (tools/build-cnitool.sh)
#   qemu   nothing more (tools/binfmt.sh enables the handler)
#   test   demo's and qemu's packages too, demo's cnitool, the Debian bullseye node root the tests
#          install into (tools/make-root.sh, cached in /var/cache/cni-delguard), the CRI client's
#          Python pins (grpcio, protobuf) and its api.proto (tools/e2e-fetch-cri-proto.sh)
# Idempotent: when every package is installed apt is not run at all (no `apt-get update`), and
# the builds are cached, so a second run takes a few seconds. No service a package brings is
# started (a policy-rc.d says no while apt runs, where there is none), and Prometheus' and
# Alertmanager's are disabled: the tests start their own servers, on their own ports.
#
# Environment: PYTHON (default python3), CNITOOL_CACHE_DIR (tools/build-cnitool.sh).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
log() { printf 'install-deps: %s\n' "$*" >&2; }
usage() { log "usage: tools/install-deps.sh demo|qemu|test..."; exit 2; }

[ $# -ge 1 ] || usage
for group in "$@"; do
    case $group in demo | qemu | test) ;; *) usage ;; esac
done
[ "$(id -u)" -eq 0 ] || { log "must run as root"; exit 1; }
# member GROUP LIST...: whether GROUP is one of LIST.
member() { local want=$1 g; shift; for g in "$@"; do [ "$g" = "$want" ] && return 0; done; return 1; }

# The packages of the groups asked for (test takes every line).
packages=()
while IFS=$'\t' read -r package groups _; do
    case $package in '' | '#'*) continue ;; esac
    for group in "$@"; do
        # shellcheck disable=SC2086 # groups is a space-separated list
        if [ "$group" = test ] || member "$group" $groups; then packages+=("$package"); break; fi
    done
done <"$repo/tools/deps.tsv"

todo=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || todo+=("$p")
done
if [ "${#todo[@]}" -gt 0 ]; then
    log "installing: ${todo[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt=(apt-get -o DPkg::Lock::Timeout=600)
    policy=/usr/sbin/policy-rc.d
    created_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        created_policy=1
        trap 'rm -f "$policy"' EXIT
    fi
    "${apt[@]}" update -qq >&2
    "${apt[@]}" install -y -qq --no-install-recommends "${todo[@]}" >/dev/null
    [ -z "$created_policy" ] || { rm -f "$policy"; trap - EXIT; }
    for service in prometheus prometheus-alertmanager; do
        printf '%s\n' "${todo[@]}" | grep -qx "$service" || continue
        if [ -d /run/systemd/system ]; then
            systemctl disable --now "$service.service" >/dev/null 2>&1 || true
        elif [ -x "/etc/init.d/$service" ]; then
            "/etc/init.d/$service" stop >/dev/null 2>&1 || true
            update-rc.d "$service" disable >/dev/null 2>&1 || true
        fi
    done
else
    log "all Debian packages of $* present"
fi

for group in "$@"; do
    case $group in
        demo | test)
            # cnitool's cache dir is hard-coded to /var/lib/cni; the tests bind-mount a private
            # dir over it in a private mount namespace, which needs the mount point to exist.
            mkdir -p /var/lib/cni
            "$repo/tools/build-cnitool.sh"
            ;;
    esac
    if [ "$group" = test ]; then
        "$repo/tools/make-root.sh" bullseye "$(dpkg --print-architecture)" \
            containernetworking-plugins >/dev/null
        "$python" -m pip install -q --disable-pip-version-check \
            grpcio==1.85.1 grpcio-tools==1.85.1 protobuf==7.36.2
        "$repo/tools/e2e-fetch-cri-proto.sh" >&2
    fi
done
