"""The peers build on a fresh Debian bookworm that has no Go but Debian's (issue 34).

README promises the two commands on a fresh bookworm, whose golang-go (1.19) cannot build the
peers (their modules need go1.26.3: `tools/install-go.sh --need`). tools/test.sh asks
tools/install-go.sh for a go before it runs tools/install-peers.sh. Here both run, as test.sh runs
them, chrooted into a debootstrap bookworm root (tools/make-root.sh, cached) that holds Debian's
golang-go and ca-certificates and nothing else of Go: install-go.sh finds no go new enough,
installs bookworm-backports' golang (1.23.5) through tools/apt-private.sh, which is still too
old, and fetches the pinned toolchain from the Go module proxy with it; install-peers.sh then
builds a peer with that go.

One peer is built there, not all of them: what the root changes is where the go comes from, and
one build shows that go can build a peer from its module, verified against our go.sum (the row
is built by the same command on the CI machine, with the same Go version). That go is at least
the highest `go` line of every peer's module (asserted), which is what would stop another one.
The peer is multus v4.3.0: pure Go (CGO_ENABLED=0: no C compiler in the root), one row, its
module needs go1.25.0 (backports' 1.23.5 alone could not build it), and it is among the two
smallest builds (856 packages with the standard library; kubelet's has 1754).

The Go module cache, the build cache and apt-private's lists and archives persist across runs
under $DELGUARD_CACHE_DIR/go-bootstrap (as a CI cache would), bound into the root; the root itself
is a fresh overlay each time. Cold (those caches empty) the test fetches backports' lists and
golang, the toolchain and multus's modules and compiles everything; warm it installs the cached
.deb and relinks. Both are printed; docs/development.md has the figures.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.guard import HOST_ARCH
from tests.support.mounts import mount, umount
from tests.support.noderoot import bound_file, needs_root, overlay, proc_mounted
from tests.support.peers import REPO, find

pytestmark = pytest.mark.build

ROW = ("multus", "v4.3.0")  # the peer built in the root (the module docstring says why)
PACKAGES = ("golang-go", "ca-certificates")  # Debian's Go (1.19), and TLS to the module proxy
CACHE = Path(os.environ.get("DELGUARD_CACHE_DIR", "/var/cache/cni-delguard")) / "go-bootstrap"
BINDS = {"mod": "/root/go/pkg/mod", "build": "/root/.cache/go-build",
         "apt": "/var/cache/apt-private"}  # CACHE/<name> -> where the root's tools use it
# The machine's way to reach the registries, as a fresh machine of its network would have it: its
# resolver and its CA bundle (which holds an egress proxy's CA where there is one).
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PASSED_ON = ("GOPROXY", "GOSUMDB", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
             "no_proxy", "NO_PROXY")  # the machine's own settings for reaching the registries


def template() -> Path:
    made = subprocess.run([str(REPO / "tools/make-root.sh"), "bookworm", HOST_ARCH, *PACKAGES],
                          capture_output=True, text=True, check=False, timeout=3600)
    assert made.returncode == 0, made.stderr
    return Path(made.stdout.strip())


@contextlib.contextmanager
def bound_dirs(root: Path) -> Iterator[None]:
    done: list[Path] = []
    try:
        for name, inside in BINDS.items():
            (CACHE / name).mkdir(parents=True, exist_ok=True)
            target = root / inside.lstrip("/")
            target.mkdir(parents=True, exist_ok=True)
            mount("--bind", str(CACHE / name), str(target))
            done.append(target)
        yield
    finally:
        for target in reversed(done):
            umount(target)


def in_root(root: Path, script: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root", "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive",
           "APT_PRIVATE_DIR": BINDS["apt"], "DELGUARD_PEERS_CACHE": "/tmp/peers"}
    env |= {k: os.environ[k] for k in PASSED_ON if k in os.environ}
    return subprocess.run(["chroot", str(root), "/usr/bin/env", "-i",
                           *(f"{k}={v}" for k, v in env.items()), "bash", "-euo", "pipefail",
                           "-c", script],
                          capture_output=True, text=True, check=False, timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result.stdout.strip()


def at_least(have: str, need: str) -> bool:
    """go1.26.8 against go1.26.3, as Go orders releases (a missing patch is .0)."""
    def release(v: str) -> tuple[int, ...]:
        return tuple(int(n) for n in [*re.findall(r"\d+", v), "0", "0"][:3])
    return release(have) >= release(need)


def go_sum_hash(module: str, version: str) -> str:
    peer = find(*ROW)
    found = re.search(rf"^{re.escape(module)} {re.escape(version)} (h1:\S+)$",
                      (peer.module / "go.sum").read_text(), re.M)
    assert found, f"{module} {version} not in go.sum"
    return found.group(1)


def test_the_peers_build_on_a_bookworm_with_only_debians_go(tmp_path: Path) -> None:
    needs_root()
    peer = find(*ROW)
    need = ok(subprocess.run([str(REPO / "tools/install-go.sh"), "--need"], capture_output=True,
                             text=True, check=False, timeout=60))
    with overlay(template(), tmp_path / "bookworm") as root, proc_mounted(root), \
            bound_file(Path("/etc/resolv.conf"), root, "/etc/resolv.conf"), \
            bound_file(Path(CA_BUNDLE), root, CA_BUNDLE), bound_dirs(root):
        for part in ("tools", "peers"):
            shutil.copytree(REPO / part, root / "src" / part)
        sources = (root / "etc/apt/sources.list").read_text()

        # No Go but Debian's: bookworm's golang-go, too old for the peers' modules.
        assert ok(in_root(root, "type -aP go | xargs readlink -f | sort -u")) == \
            "/usr/lib/go-1.19/bin/go"  # /usr/bin/go and /bin/go (merged /usr)
        assert [p.name for p in (root / "usr/lib").glob("go-*")] == ["go-1.19"]
        assert not (root / "usr/local/go").exists()
        assert ok(in_root(root, "go env GOVERSION")).startswith("go1.19.")

        started = time.monotonic()
        fetched = in_root(root, "/src/tools/install-go.sh")
        go = ok(fetched)
        go_seconds = time.monotonic() - started
        version = ok(in_root(root, f"GOTOOLCHAIN=local {go} env GOVERSION"))
        assert at_least(version, need), (version, need)
        backports = ok(in_root(root, "ls -d /usr/lib/go-* | grep -v 1.19")) + "/bin/go"
        if at_least(ok(in_root(root, f"GOTOOLCHAIN=local {backports} env GOVERSION")), need):
            assert go == backports, fetched.stderr  # a backports' golang that is new enough
        else:  # 1.23.5 today: the pinned toolchain, from the module proxy
            assert go.startswith(f"{BINDS['mod']}/golang.org/toolchain@v0.0.1-{version}."), (
                go, backports, fetched.stderr)
        assert ok(in_root(root, "go env GOVERSION")).startswith("go1.19.")  # Debian's still
        assert (root / "etc/apt/sources.list").read_text() == sources
        assert not list((root / "etc/apt/sources.list.d").glob("*"))

        started = time.monotonic()
        ok(in_root(root, f'PATH="$(dirname {go}):$PATH" /src/tools/install-peers.sh '
                         f"{peer.name}-{peer.version}"))
        build_seconds = time.monotonic() - started
        built = f"/tmp/peers/{peer.name}-{peer.version}/bin"
        for command in peer.commands:
            info = ok(in_root(root, f"{go} version -m {built}/{command}"))
            assert info.startswith(f"{built}/{command}: {version}\n"), info
            main = re.search(r"^\tmod\t(\S+)\t(\S+)\t(h1:\S+)$", info, re.M)
            assert main and main.groups() == (peer.source, peer.version,
                                              go_sum_hash(peer.source, peer.version)), info
    print(f"\n[go-bootstrap] {backports} then {go}: {go_seconds:.0f} s; {peer.name} "
          f"{peer.version} built in the root: {build_seconds:.0f} s (caches in {CACHE}; "
          f"load {os.getloadavg()[0]:.1f})")
