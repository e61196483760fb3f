"""doctor's checks of what the runtime runs: is its conf wrapped, are the guard and its delegate
there, and does the guard run."""

from __future__ import annotations

import os

from cni_delguard import PLUGIN_TYPE
from cni_delguard.cni.skel import valid_name
from cni_delguard.guard import defaults
from cni_delguard.node import runs
from cni_delguard.ops import text
from cni_delguard.ops.doctor.node import INFO, OK, PROBLEM, Finding, Node


def check_conf(node: Node) -> list[Finding]:
    """Is the conf the runtime uses (first by name) wrapped by the guard?"""
    if node.conf_path is None:
        return [Finding("conf", PROBLEM, f"no CNI conf in {node.conf_dir}", node.conf_dir)]
    name = os.path.basename(node.conf_path)
    if node.conf_error is not None:
        return [Finding("conf", PROBLEM, f"{name}: {node.conf_error}", node.conf_path)]
    if node.guard is None:
        return [
            Finding(
                "conf",
                PROBLEM,
                f"{name}, the conf the runtime uses, is not wrapped by "
                f"cni-delguard: run `{install(node)}`",
                node.conf_path,
            )
        ]
    delegate = node.guard.get("delegate")
    dtype = delegate.get("type") if isinstance(delegate, dict) else None
    found = [
        Finding("conf", OK, f"{name} (first by name) is wrapped around {dtype!r}", node.conf_path)
    ]
    if node.guard.get("mode") == defaults.OBSERVE:
        found.append(
            Finding(
                "conf",
                INFO,
                "observe mode: every DEL is forwarded; the log says what the guard would "
                f"have decided (`{install(node, '--mode', 'enforce')}` "
                "lets it decide)",
                node.conf_path,
            )
        )
    return found


def check_plugins(node: Node) -> list[Finding]:
    """Do the guard's binary and the plugin it wraps exist, and does the guard run?"""
    if node.guard is None:
        return []
    guard = os.path.join(node.bin_dir, PLUGIN_TYPE)
    found = [_runs(guard, node)]
    delegate = node.guard.get("delegate")
    dtype = delegate.get("type") if isinstance(delegate, dict) else None
    if not isinstance(dtype, str) or not valid_name(dtype):
        found.append(Finding("plugins", PROBLEM, f"the delegate's type {dtype!r} is not a plugin"))
    elif (unseen := _link_out_of_sight(node, os.path.join(node.bin_dir, dtype))) is not None:
        found.append(
            Finding(
                "plugins",
                INFO,
                f"the delegate {dtype!r} in {node.bin_dir} links to {unseen}, which is not "
                f"under {node.root} here (the installer's pod mounts only the CNI dirs): "
                "check it on the node",
                os.path.join(node.bin_dir, dtype),
            )
        )
    elif not os.access(_on_node(node, os.path.join(node.bin_dir, dtype)), os.X_OK):
        found.append(
            Finding(
                "plugins",
                PROBLEM,
                f"the delegate {dtype!r} is not an executable "
                f"in {node.bin_dir}: every ADD will fail",
                os.path.join(node.bin_dir, dtype),
            )
        )
    else:
        found.append(Finding("plugins", OK, f"the delegate {dtype!r} is in {node.bin_dir}"))
    return found


def install(node: Node, *argv: str) -> str:
    """The install command for this node, with its layout: the one a runbook's `doctor --layout`
    ran with, or the one found (an install with another would look in other dirs)."""
    return text.command("install", node.root, "--layout", node.layout, *argv)


def _on_node(node: Node, path: str) -> str:
    """A path under the root with the node's own links followed inside it, as the runtime
    follows them: a plugin linked by its absolute path (/opt/cni/bin/bridge -> /usr/lib/cni/
    bridge) names nothing from a pod that sees the node at /host: doctor run there with
    `kubectl exec` would call such a delegate missing."""
    return node.host.located(node.host.on_node(path) or "/")


def _link_out_of_sight(node: Node, path: str) -> str | None:
    """The node's path a plugin links to, when that path's dir is not there at all under a root
    other than / (the pod sees the node's CNI dirs alone, not /usr/lib/cni where Debian's
    package puts the plugins it links from /opt/cni/bin); None otherwise. A link whose dir is
    there but whose file is not is a plugin missing on the node, and said so."""
    if node.host.is_host or not os.path.islink(path):
        return None
    resolved = _on_node(node, path)
    if os.path.lexists(os.path.dirname(resolved)):
        return None
    return node.host.on_node(resolved)


def _runs(path: str, node: Node) -> Finding:
    if not os.access(path, os.X_OK):
        return Finding(
            "plugins",
            PROBLEM,
            f"{path} is missing or not executable: run `{install(node)}`",
            path,
        )
    versions, why = runs.answers_version(path, node.root)
    if versions is None:
        return Finding("plugins", PROBLEM, why, path)
    return Finding("plugins", OK, f"{path} runs (CNI versions {', '.join(map(str, versions))})")
