"""A node with real multus in front of the kube-ovn fake, and no runtime: the bench of
tests/multus_chain and benchmarks/multus_storm.

One `MultusNode` is a mount namespace of its own (tests/support/nodens.py), a CNI bin dir with the
guard under test (tests/support/guard.py), multus, the kube-ovn fake and cnitool's conf dir, and
one chain of tests/support/multus.py in one of its FORMS. What a runtime would do is done by
cnitool (built from Debian's CNI source) inside the node, or, where only the plugin's own cost
matters (the storm), by exec'ing the conflist's plugin the way libcni does.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.chains import Behaviour, Pod
from tests.support.cnitool import Outcome, base_env, cnitool_binary
from tests.support.confs import guard_plugin
from tests.support.guard import install_guard
from tests.support.multus import CNI_VERSION, MultusThick, MultusThin, Thin
from tests.support.nodens import NodeNS
from tests.support.records import guard_log

Chain = MultusThin | MultusThick

# The multus configurations the suite runs, as data: name -> how to make the chain in a node.
FORMS: dict[str, Callable[[NodeNS], Chain]] = {
    "thin-inline": lambda node: MultusThin(form=Thin.INLINE),
    "thin-clusterNetwork-path": lambda node: MultusThin(form=Thin.CLUSTER_NETWORK_PATH),
    "thick": lambda node: MultusThick(enter=node.enter),
}


@dataclass(frozen=True)
class Sandbox:
    netns: str  # its path inside the node
    pod: Pod

    @property
    def cid(self) -> str:
        """cnitool's container ID for this netns ('cnitool-' + 20 hex of sha512 of the path)."""
        return "cnitool-" + hashlib.sha512(self.netns.encode()).hexdigest()[:20]

    @property
    def cni_args(self) -> str:
        p = self.pod
        return (f"IgnoreUnknown=1;K8S_POD_NAMESPACE={p.namespace};K8S_POD_NAME={p.name};"
                f"K8S_POD_INFRA_CONTAINER_ID={self.cid};K8S_POD_UID={p.uid}")


@dataclass
class MultusNode:
    form: str
    node: NodeNS
    chain: Chain
    confs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: int = 0

    @classmethod
    def create(cls, form: str) -> MultusNode:
        node = NodeNS.create()
        bench = cls(form, node, FORMS[form](node))
        try:
            for sub in ("bin", "conf", "chain"):
                (node.tmp / sub).mkdir()
            install_guard(bench.bin_dir)
            bench.chain.start(bench.bin_dir, node.tmp / "chain", node.cni_cache)
        except BaseException:
            bench.close()
            raise
        return bench

    @property
    def bin_dir(self) -> Path:
        return self.node.tmp / "bin"

    @property
    def conf_dir(self) -> Path:
        return self.node.tmp / "conf"

    @property
    def thick(self) -> MultusThick:
        assert isinstance(self.chain, MultusThick)
        return self.chain

    # -- configs -------------------------------------------------------------------------------
    def network(self, guard: bool, behaviour: Behaviour | None = None) -> str:
        """Write the conflist the runtime would run (multus, or the guard wrapping multus)."""
        plugins = self.chain.plugins(behaviour or Behaviour())
        if guard:
            # The guard's paths are its defaults: inside the node they are the node's own.
            plugins = [guard_plugin(plugins[0], logLevel="debug"), *plugins[1:]]
        name = f"{'guarded' if guard else 'bare'}-{self.form}"
        return self._write(name, {"cniVersion": CNI_VERSION, "name": name, "plugins": plugins})

    def kube_ovn_network(self) -> str:
        """kube-ovn's own conflist with no multus in front (a reference for what multus adds)."""
        assert self.chain.kube_ovn is not None
        return self._write("kube-ovn", self.chain.kube_ovn.conflist())

    def _write(self, name: str, conf: dict[str, Any]) -> str:
        (self.conf_dir / f"{name}.conflist").write_text(json.dumps(conf, indent=1))
        self.confs[name] = conf
        return name

    # -- pods and sandboxes ----------------------------------------------------------------------
    def sandbox(self, in_api: bool = True) -> Sandbox:
        self.pods += 1
        pod = Pod("default", f"pod{self.pods}", f"uid-{self.pods}-{self.node.tmp.name}")
        box = Sandbox(self.node.add_netns(), pod)
        if in_api:
            self.set_pod(box, True)
        return box

    def set_pod(self, box: Sandbox, exists: bool) -> None:
        """Create or delete the sandbox's pod in the API. multus-daemon reads pods from its
        informer, which learns of a change asynchronously; it is restarted, so it lists the API
        again before it serves (its socket answers only after the sync), and the next request
        sees the change for certain."""
        self.chain.pod_exists(box.pod, exists)
        if isinstance(self.chain, MultusThick):
            self.chain.restart()

    # -- the runtime's side ------------------------------------------------------------------------
    def cnitool(self, command: str, network: str, box: Sandbox) -> Outcome:
        env = base_env() | {"NETCONFPATH": str(self.conf_dir), "CNI_PATH": str(self.bin_dir),
                            "CNI_IFNAME": "eth0", "CNI_ARGS": box.cni_args}
        res = self.node.run([str(cnitool_binary()), command, network, box.netns], env=env,
                            timeout=180)
        return Outcome(res.returncode, res.stdout, res.stderr)

    def exec_plugin(self, command: str, network: str, box: Sandbox) -> Outcome:
        """Exec the network's one plugin as libcni does (its config with name and cniVersion)."""
        conf = self.confs[network]
        stdin = dict(conf["plugins"][0], name=network, cniVersion=conf["cniVersion"])
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               "CNI_COMMAND": command, "CNI_CONTAINERID": box.cid, "CNI_NETNS": box.netns,
               "CNI_IFNAME": "eth0", "CNI_ARGS": box.cni_args, "CNI_PATH": str(self.bin_dir)}
        res = self.node.run([str(self.bin_dir / stdin["type"])], env=env, timeout=180,
                            stdin=json.dumps(stdin))
        return Outcome(res.returncode, res.stdout, res.stderr)

    # -- what the node holds ---------------------------------------------------------------------
    def multus_cache(self, box: Sandbox) -> Path:
        return self.node.cni_cache / "multus" / box.cid

    def guard_log(self, **fields: Any) -> list[dict[str, Any]]:
        return guard_log(self.node.tmp / "var-log" / "cni-delguard" / "delguard.log", **fields)

    def multus_dels(self, box: Sandbox | None = None) -> int:
        """DELs multus itself handled: the daemon's requests (thick) or the thin plugin's own
        log (one 'CmdDel: &{<container> ...' debug message per DEL it ran). Counted in the whole
        text, not by line: multus writes a line's time, message and newline in three writes, so
        processes logging at once interleave them (a line-wise count lost 1 in 40)."""
        cid = None if box is None else box.cid
        if isinstance(self.chain, MultusThick):
            return self.chain.requests("DEL", cid)
        assert self.chain.log is not None
        try:
            text = self.chain.log.read_text(errors="replace")
        except FileNotFoundError:
            return 0
        return text.count("CmdDel: &{" if cid is None else f"CmdDel: &{{{cid} ")

    def close(self) -> list[str]:
        self.chain.stop()
        return self.node.close()
