"""The guard in action, on real plugins in real network namespaces, driven by cnitool.

Run by tools/demo.sh (which installs the Debian parts, builds cnitool and the frozen guard).
Everything happens in namespaces and a temp dir made here and removed at the end: the bridge and
its iptables rules live in an outer namespace, never on the host.

Scenes:
  1. the deadlock: DEL for a sandbox that never had a network, through a delegate that fails
     without state (a labelled stand-in for kube-ovn; no Debian plugin fails that way), no guard;
  2. the same DEL with the guard in front: skipped, delegate not called;
  3. Debian's bridge + host-local through the guard: ADD, CHECK, DEL forwarded, no lease leaked;
  4. an ADD that never completed (delegate hangs, the guard's timeout kills it): DEL forwarded,
     the delegate's failure ignored, DEL succeeds;
  5. a completed ADD whose delegate DEL fails: the error is propagated, not hidden;
  6. `cni-delguard stats`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUARD = REPO / "dist" / "cni-delguard" / "cni-delguard"
CNITOOL = REPO / ".cache" / "cnitool" / "cnitool"
STANDIN = REPO / "tests" / "fakes" / "stale_delegate.py"
# cnitool's cache dir is /var/lib/cni (not configurable): each cnitool runs in a private mount
# namespace with the demo's own dir bound there, so the host's /var/lib/cni is never written.
NSRUN = REPO / "tests" / "support" / "nsrun.py"


class Demo:
    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.root = Path(tempfile.mkdtemp(prefix="cni-delguard-demo-"))
        self.bin = self.root / "bin"
        self.conf = self.root / "net.d"
        self.log = self.root / "delguard.log"
        self.netns: list[str] = []
        self.bin.mkdir()
        self.conf.mkdir()
        (self.root / "var-lib-cni").mkdir()
        for plugin in Path("/usr/lib/cni").iterdir():
            (self.bin / plugin.name).symlink_to(plugin)
        (self.bin / "cni-delguard").symlink_to(GUARD)
        # The demo keeps the guard's state and log under a temp dir, which the guard allows
        # only when the node's admin says so: the settings file beside the plugin
        # (docs/configuration.md).
        settings = self.bin / "cni-delguard.paths"
        settings.write_text(f"state {self.root}\nlog {self.root}\n")
        settings.chmod(0o644)
        standin = self.bin / "kube-ovn-standin"
        standin.write_text(f"#!{sys.executable} -I\n{STANDIN.read_text()}")
        standin.chmod(0o755)
        self.outer = self.new_netns("outer")

    def new_netns(self, role: str) -> str:
        name = f"dgdemo-{role}-{self.tag}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        self.netns.append(name)
        return name

    def network(self, name: str, plugin: dict[str, object]) -> str:
        net = f"{name}-{self.tag}"
        body = {"cniVersion": "1.0.0", "name": net, "plugins": [plugin]}
        (self.conf / f"{net}.conflist").write_text(json.dumps(body, indent=2))
        return net

    def guarded(self, delegate: dict[str, object], **guard: object) -> dict[str, object]:
        return {
            "type": "cni-delguard",
            "delegate": delegate,
            "stateDir": str(self.root / "state"),
            "logFile": str(self.log),
            **guard,
        }

    def standin(self, **knobs: object) -> dict[str, object]:
        return {
            "type": "kube-ovn-standin",
            "stateDir": str(self.root / "standin"),
            "recordFile": str(self.root / "standin-calls.jsonl"),
            **knobs,
        }

    def cnitool(self, command: str, net: str, ns: str) -> int:
        private = ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I",
                   str(NSRUN), f"{self.root / 'var-lib-cni'}:/var/lib/cni", "--"]
        argv = [*private, "ip", "netns", "exec", self.outer, str(CNITOOL), command, net,
                f"/run/netns/{ns}"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "NETCONFPATH": str(self.conf),
            "CNI_PATH": str(self.bin),
        }
        print(f"\n$ cnitool {command} {net} /run/netns/{ns}", flush=True)
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        for line in (proc.stdout + proc.stderr).strip().splitlines():
            print(f"  {line}")
        print(f"  -> exit {proc.returncode}")
        return proc.returncode

    def show_log(self, since: int) -> int:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        for line in lines[since:]:
            rec = json.loads(line)
            extra = f" delegateExit={rec['delegateExit']}" if "delegateExit" in rec else ""
            print(
                f"  guard log: {rec['command']} decision={rec['decision']} "
                f"evidence={rec.get('evidence', [])}{extra}"
            )
            print(f"             reason: {rec['reason']}")
        return len(lines)

    def standin_calls(self) -> list[str]:
        path = self.root / "standin-calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(x)["command"] for x in path.read_text().splitlines()]

    def close(self) -> None:
        for ns in reversed(self.netns):
            subprocess.run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def title(text: str) -> None:
    print(f"\n=== {text}")


def scenes(d: Demo) -> list[str]:
    problems = []
    seen = 0
    title("1. The deadlock: DEL for a sandbox whose ADD never happened, delegate called directly")
    plain = d.network("demo-plain", d.standin())
    never = d.new_netns("never")
    if d.cnitool("del", plain, never) == 0:
        problems.append("scene 1: the stand-in's DEL should have failed")
    print("  (a runtime that cannot DEL cannot remove the sandbox: its name stays reserved)")

    title("2. The same DEL with cni-delguard in front")
    calls_before = len(d.standin_calls())
    guarded = d.network("demo-guarded", d.guarded(d.standin()))
    if d.cnitool("del", guarded, never) != 0:
        problems.append("scene 2: the guarded DEL should have succeeded")
    seen = d.show_log(seen)
    print(f"  delegate calls during this DEL: {len(d.standin_calls()) - calls_before}")

    title("3. Debian's bridge + host-local through the guard")
    leases = d.root / "host-local"
    bridge = d.network(
        "demo-bridge",
        d.guarded(
            {
                "type": "bridge",
                "bridge": f"dgbr{d.tag}",
                "isGateway": True,
                "ipMasq": True,
                "ipam": {"type": "host-local", "subnet": "10.251.0.0/24", "dataDir": str(leases)},
            }
        ),
    )
    pod = d.new_netns("pod")
    for command in ("add", "check", "del"):
        if d.cnitool(command, bridge, pod) != 0:
            problems.append(f"scene 3: {command} failed")
    seen = d.show_log(seen)
    held = [p.name for p in (leases / bridge).glob("10.*")] if (leases / bridge).exists() else []
    print(f"  host-local leases left: {held or 'none'}")
    if held:
        problems.append("scene 3: a lease leaked")

    title("4. An ADD that never completed (the delegate hangs; the guard's 2 s timeout kills it)")
    hung = d.network("demo-hung", d.guarded(d.standin(hang=["ADD"]), timeouts={"add": 2, "del": 5}))
    pod2 = d.new_netns("pod2")
    d.cnitool("add", hung, pod2)
    seen = d.show_log(seen)
    if d.cnitool("del", hung, pod2) != 0:
        problems.append("scene 4: DEL after an interrupted ADD should succeed")
    seen = d.show_log(seen)

    title("5. A completed ADD whose delegate DEL fails: the error reaches the runtime")
    failing = d.network("demo-failing", d.guarded(d.standin(failDel=11)))
    pod3 = d.new_netns("pod3")
    d.cnitool("add", failing, pod3)
    if d.cnitool("del", failing, pod3) == 0:
        problems.append("scene 5: a real DEL failure must not be hidden")
    seen = d.show_log(seen)
    d.network("demo-failing", d.guarded(d.standin()))  # same name: the delegate works again
    d.cnitool("del", failing, pod3)
    d.show_log(seen)

    title("6. cni-delguard stats")
    sys.stdout.flush()
    subprocess.run([str(GUARD), "stats", "--log-file", str(d.log)], check=False)
    return problems


def main() -> int:
    for need in (GUARD, CNITOOL):
        if not need.exists():
            print(f"missing {need}: run tools/demo.sh", file=sys.stderr)
            return 1
    demo = Demo()
    try:
        problems = scenes(demo)
    finally:
        demo.close()
    print(
        "\n"
        + (
            "demo OK: every scene behaved as described"
            if not problems
            else "demo FAILED:\n  " + "\n  ".join(problems)
        )
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
