"""A fake node root whose dirs a test moves as a distribution does (tests/node_roots): its
"multus" is the static fake delegate (tests/fakes/static_delegate, FAKE: it records each call in
the node root only), the guard is the frozen bundle."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support import guard
from tests.support.installerproc import command
from tests.support.records import guard_log

CHROOT = "/usr/sbin/chroot"
FAKE_DIR = "/delguard-fake"  # the fake delegate's files, inside the node root only
MULTUS_CONF = {"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "multus",
               "stateDir": FAKE_DIR, "recordFile": f"{FAKE_DIR}/calls.jsonl"}


@dataclass
class Node:
    root: Path
    fake: Path  # the static fake delegate ("multus"), copied into every bin dir made

    def path(self, on_node: str) -> Path:
        return self.root / on_node.lstrip("/")

    def bin_dir(self, on_node: str) -> Path:
        d = self.path(on_node)
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.fake, d / "multus")
        return d

    def conf(self, conf_dir: str) -> Path:
        path = self.path(conf_dir) / "00-multus.conf"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(".00-multus.conf.new")
        tmp.write_text(json.dumps(MULTUS_CONF, indent=1) + "\n")
        os.replace(tmp, path)  # as multus writes it: one rename
        return path

    def link(self, on_node: str, target: str) -> None:
        """Point the link at `target` in one rename, as k3s and snapd move theirs."""
        tmp = self.path(on_node + ".new")
        tmp.symlink_to(target)
        os.replace(tmp, self.path(on_node))

    def args(self, *extra: str) -> list[str]:
        bundle = [] if guard.under_test() == "frozen" else [
            "--bundle-dir", str(guard.frozen_binary().parent)]
        return ["--root", str(self.root), *bundle, *extra]

    def ready(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command(), "ready", "--root", str(self.root)],
                              capture_output=True, text=True, timeout=120, check=False)

    def skipped_del(self, bin_dir: str, conf: Path, cid: str) -> None:
        """The plugin where the runtime looks, run as the runtime runs it: a DEL with no
        evidence is answered at once (exit 0, nothing on stdout) and logged as skipped."""
        code, out = guard.exec_cni(Path(bin_dir), "DEL", conf.read_bytes(), cid=cid,
                                   prefix=(CHROOT, str(self.root)))
        assert (code, out) == (0, None), out
        decisions = {r["containerID"]: r["decision"]
                     for r in guard_log(self.path("/var/log/cni-delguard/delguard.log"),
                                        command="DEL")}
        assert decisions.get(cid) == "skip", decisions


def wrapped(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("type") == "cni-delguard"
    except (OSError, ValueError):
        return False
