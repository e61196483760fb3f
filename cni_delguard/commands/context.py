"""What every command shares: the invocation (`Context`), loading the validated config, and the
fields of a decision's log line.

The commands import this module; it imports none of them (the dispatch table is in
`commands/__init__.py`), so there is no circle at the centre.
"""

from __future__ import annotations

import time

from cni_delguard import SUPPORTED_VERSIONS
from cni_delguard.cni import errors, skel
from cni_delguard.guard import config, evidence
from cni_delguard.guard.log import Logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from cni_delguard.cni.skel import Invocation
    from cni_delguard.guard.config import Defaults, Settings
    from cni_delguard.guard.decide import Evidence


class Context:
    """One invocation: what the runtime gave us and where the decision goes."""

    def __init__(
        self, inv: Invocation, environ: Mapping[str, str], dflt: Defaults | None = None
    ) -> None:
        self.inv = inv
        self.environ = environ
        # What a config leaves out; None: the guard's own (guard/defaults.py). Tests give theirs.
        self.defaults = dflt
        self.started = time.monotonic()
        self.log = Logger("", "info")
        # Which pod this is (CNI_ARGS), for markers and log lines; only values that validate.
        self.pod = skel.pod_identity(inv.args)
        self._pod_fields: dict[str, object] = {}
        if "namespace" in self.pod and "name" in self.pod:
            self._pod_fields["pod"] = f"{self.pod['namespace']}/{self.pod['name']}"
        if "uid" in self.pod:
            self._pod_fields["podUID"] = self.pod["uid"]

    def record(self, level: str, network: str, **fields: object) -> None:
        self.log.event(
            level,
            command=self.inv.command,
            containerID=self.inv.container_id,
            ifname=self.inv.ifname,
            network=network,
            **self._pod_fields,
            durationMs=round((time.monotonic() - self.started) * 1000.0, 1),
            **fields,
        )

    def use(self, settings: Settings) -> None:
        own = (self.defaults or config.Defaults()).log_file
        self.log = Logger(settings.log_file, settings.log_level, self.inv.cni_path, builtin=own)


def load(ctx: Context, conf: dict[str, Any]) -> Settings:
    settings = config.load(conf, ctx.inv.cni_path, dflt=ctx.defaults)
    ctx.use(settings)
    return settings


def require_version(settings: Settings, minimum: str, command: str) -> None:
    """CHECK exists from spec 0.4.0, GC and STATUS from 1.1.0 (code 1 before that)."""
    if SUPPORTED_VERSIONS.index(settings.cni_version) < SUPPORTED_VERSIONS.index(minimum):
        raise errors.CniError(
            errors.INCOMPATIBLE_VERSION,
            f"config version {settings.cni_version} does not allow {command}",
        )


def decision_fields(ev: Evidence, decision: str, reason: str) -> dict[str, object]:
    return {"evidence": ev.names(), "decision": decision, "reason": reason}


def gather(ctx: Context, settings: Settings, conf: dict[str, Any]) -> Evidence:
    return evidence.gather(
        settings, ctx.inv.container_id, ctx.inv.ifname, isinstance(conf.get("prevResult"), dict)
    )
