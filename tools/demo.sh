#!/usr/bin/env bash
# demo.sh: the main job. On a fresh Debian bookworm machine, as root: install the Debian parts
# the demo needs (tools/install-deps.sh demo: reference plugins, iproute2, Go to build cnitool
# from Debian's CNI source), build the frozen guard, and show it on real plugins in real network
# namespaces (demo/demo.py).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
cd "$repo"

[ "$(id -u)" -eq 0 ] || { echo "demo.sh: run as root (network namespaces)" >&2; exit 1; }
tools/install-deps.sh demo
tools/build.sh
exec "$python" -I demo/demo.py
