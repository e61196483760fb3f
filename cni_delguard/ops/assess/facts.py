"""What `assess` found on a node (plain data: the probe fills it, the report reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cni_delguard.ops.assess import chains


@dataclass(frozen=True)
class Runtime:
    name: str | None  # the matrix's runtime name, None when not one it ran (probe.CRI_NAMES)
    version: str | None
    source: str  # where it was found ("--runtime containerd://2.1.6", "package containerd ...")
    reported_name: str = ""  # as the runtime named itself


@dataclass
class Found:
    """The node as assess sees it."""

    runtime: Runtime | None = None
    tried: list[str] = field(default_factory=list)  # why each runtime source gave nothing
    conf_path: str | None = None
    conf_error: str | None = None
    wrapped: bool = False
    mode: str | None = None
    behind: chains.Behind = field(default_factory=lambda: chains.Behind(None))
    multus_version_from: str = ""
    notes: list[str] = field(default_factory=list)
