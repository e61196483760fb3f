"""The window a distribution's upgrade opens under a running watcher.

    sudo python -m benchmarks.layout_moves [--moves N] [--bin PATH]

Runs the frozen binary (tools/build.sh) as `install --watch --root R` with its default poll
interval on temp node roots, and moves the runtime's dirs as the distribution's upgrade does,
N times each, 2 s apart:
- k3s release-dir upgrade (before October 2024): a new data/<hash>/bin, data/current moved to it,
  the old release dir removed. The conf is unchanged and names the guard: the window is from the
  link's move until the new bin dir holds the guard (its link, which appears complete);
- k3s into data/cni: the dir appears (renamed into place); the same window;
- MicroK8s refresh: the revision dir copied (guard included), `current` moved, multus's conf
  regenerated in the new revision, unwrapped: the window is from that write until it names the
  guard again (the node unguarded, never naming a missing guard: the copy holds the plugin).
Polled every 5 ms. Prints one JSON object; needs root (the installer runs the plugin chrooted).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.installer_watch import CONF, wait, wrapped
from benchmarks.subjects import FROZEN

K3S_DATA = "var/lib/rancher/k3s/data"
K3S_CONF = "var/lib/rancher/k3s/agent/etc/cni/net.d"
SNAP = "var/snap/microk8s"


def relink(link: Path, target: str) -> None:
    tmp = link.with_name(link.name + ".new")
    tmp.symlink_to(target)
    os.replace(tmp, link)


def write_conf(conf_dir: Path) -> Path:
    conf_dir.mkdir(parents=True, exist_ok=True)
    tmp, conf = conf_dir / ".multus.tmp", conf_dir / "00-multus.conf"
    tmp.write_text(CONF.replace("NET", "net0"))
    os.replace(tmp, conf)
    return conf


def has_guard(bin_dir: Path) -> Callable[[], bool]:
    return (bin_dir / "cni-delguard").is_symlink


def k3s_release(root: Path, moves: int) -> list[float]:
    data = root / K3S_DATA
    (data / "r0/bin").mkdir(parents=True)
    relink(data / "current", f"/{K3S_DATA}/r0")
    write_conf(root / K3S_CONF)
    _ready(root / K3S_CONF / "00-multus.conf")
    return [_move(data, i) for i in range(1, moves + 1)]


def _move(data: Path, i: int) -> float:
    (data / f"r{i}/bin").mkdir(parents=True)
    relink(data / "current", f"/{K3S_DATA}/r{i}")
    took = wait(has_guard(data / f"r{i}/bin"), "the guard in the new release")
    shutil.rmtree(data / f"r{i - 1}")
    time.sleep(2)
    return took


def k3s_data_cni(root: Path, moves: int) -> list[float]:
    windows = []
    for i in range(moves):
        node = root / f"n{i}"
        data = node / K3S_DATA
        (data / "r0/bin").mkdir(parents=True)
        relink(data / "current", f"/{K3S_DATA}/r0")
        write_conf(node / K3S_CONF)
        with _Watching(node) as _:
            _ready(node / K3S_CONF / "00-multus.conf")
            (data / ".cni").mkdir()
            os.rename(data / ".cni", data / "cni")
            windows.append(wait(has_guard(data / "cni"), "the guard in data/cni"))
    return windows


def microk8s_refresh(root: Path, moves: int) -> list[float]:
    snap = root / SNAP
    (snap / "1/opt/cni/bin").mkdir(parents=True)
    relink(snap / "current", "1")
    conf = write_conf(snap / "1/args/cni-network")
    windows: list[float] = []
    _ready(conf)
    for i in range(2, moves + 2):
        shutil.copytree(snap / f"{i - 1}", snap / f"{i}", symlinks=True)
        relink(snap / "current", str(i))
        conf = write_conf(snap / f"{i}/args/cni-network")
        windows.append(wait(lambda c=conf: wrapped(c), "the new revision's conf wrapped"))
        shutil.rmtree(snap / f"{i - 1}")
        time.sleep(2)
    return windows


class _Watching:
    """`install --watch --root NODE` for the time of the block."""

    bin = str(FROZEN)

    def __init__(self, node: Path) -> None:
        self.node = node

    def __enter__(self) -> subprocess.Popen[bytes]:
        self.log = open(self.node / "watch.log", "w")
        self.proc = subprocess.Popen([self.bin, "install", "--watch", "--root", str(self.node)],
                                     stdout=self.log, stderr=self.log)
        return self.proc

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def _ready(conf: Path) -> None:
    wait(lambda: wrapped(conf), "the conf wrapped at start")
    time.sleep(2)  # the first install's copy and hash are done


def summary(windows: list[float]) -> dict[str, float]:
    return {"n": len(windows), "min": round(min(windows), 3),
            "median": round(statistics.median(windows), 3), "max": round(max(windows), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--bin", default=str(FROZEN))
    args = parser.parse_args(argv)
    _Watching.bin = args.bin
    result = {}
    cases = (("k3s_release_dir_s", k3s_release), ("microk8s_refresh_s", microk8s_refresh))
    for name, case in cases:
        with tempfile.TemporaryDirectory() as tmp, _Watching(Path(tmp)):
            result[name] = summary(case(Path(tmp), args.moves))
    with tempfile.TemporaryDirectory() as tmp:
        result["k3s_data_cni_s"] = summary(k3s_data_cni(Path(tmp), args.moves))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
