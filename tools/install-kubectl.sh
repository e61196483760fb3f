#!/usr/bin/env bash
# install-kubectl.sh: Debian's kubectl (source package kubernetes, trixie) for the manifest tests
# (`kubectl kustomize`, offline), unpacked into <repo>/.cache/kubectl by tools/unpack-deb.sh, never
# into the system: the machine may already have another package named kubectl (Google's), which
# dpkg would replace. Prints the binary's path. Idempotent: a second run only prints it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$("$repo/tools/unpack-deb.sh" kubectl/trixie usr/bin/kubectl)
"$bin" version --client >/dev/null
echo "$bin"
