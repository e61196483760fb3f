#!/bin/sh
# smoke-test.sh EXE: the installer in a frozen bundle, end to end on a fake node root.
# install (bundle into the bin dir, conf wrapped), exec VERSION through the installed link, the
# readiness probe, install again (nothing to do), uninstall (conf byte-identical, bin dir empty,
# the probe not ready any more).
# Run by the Dockerfile's build stage; POSIX sh and coreutils only.
set -eu
exe=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/opt/cni/bin" "$root/etc/cni/net.d"
conf=$root/etc/cni/net.d/00-multus.conf
printf '%s\n' '{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus","delegates":[]}' >"$conf"
cp "$conf" "$root/original"

fail() { echo "smoke-test.sh: $*" >&2; exit 1; }

"$exe" install --root "$root" || fail "install exited $?"
grep -q '"type": "cni-delguard"' "$conf" || fail "conf not wrapped"
out=$(CNI_COMMAND=VERSION "$root/opt/cni/bin/cni-delguard" </dev/null) || fail "VERSION via link"
case $out in *supportedVersions*) ;; *) fail "VERSION printed: $out" ;; esac
"$exe" ready --root "$root" >/dev/null || fail "ready exited $? after install"
"$exe" install --root "$root" 2>"$root/again" || fail "second install exited $?"
grep -q unchanged "$root/again" || fail "second install changed something"
"$exe" uninstall --root "$root" || fail "uninstall exited $?"
cmp -s "$conf" "$root/original" || fail "uninstall did not restore the conf byte for byte"
[ -z "$(ls -A "$root/opt/cni/bin")" ] || fail "bin dir not empty after uninstall"
if "$exe" ready --root "$root" >/dev/null; then fail "ready after uninstall"; fi
echo "installer smoke test passed: install, exec via link, reinstall, uninstall"
