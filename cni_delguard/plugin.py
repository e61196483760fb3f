"""The CNI commands: cmdAdd, cmdDel, cmdCheck, cmdGc, cmdStatus, cmdVersion.

Each takes the validated invocation, the raw stdin and the environment, returns the bytes for
stdout, and raises errors.CniError for anything the runtime must see as a failure. Decisions are
made by decide.py; this module does the I/O around them and logs every decision.
"""

from __future__ import annotations

import time

from cni_delguard import (
    CURRENT_VERSION,
    SUPPORTED_VERSIONS,
    config,
    decide,
    errors,
    evidence,
    jsonlite,
)
from cni_delguard.log import Logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from cni_delguard.config import Settings
    from cni_delguard.skel import Invocation


def cmd_version() -> bytes:
    return jsonlite.dumps(
        {"cniVersion": CURRENT_VERSION, "supportedVersions": list(SUPPORTED_VERSIONS)}
    ).encode()


class Context:
    """One invocation: what the runtime gave us and where the decision goes."""

    def __init__(self, inv: Invocation, environ: Mapping[str, str]) -> None:
        self.inv = inv
        self.environ = environ
        self.started = time.monotonic()
        self.log = Logger("", "info")
        # The decision being carried out, for the log line of an error raised on the way.
        self.fields: dict[str, object] = {}

    def record(self, level: str, network: str, **fields: object) -> None:
        self.log.event(
            level,
            command=self.inv.command,
            containerID=self.inv.container_id,
            ifname=self.inv.ifname,
            network=network,
            durationMs=round((time.monotonic() - self.started) * 1000.0, 1),
            **fields,
        )

    def use(self, settings: Settings) -> None:
        self.log = Logger(settings.log_file, settings.log_level)


def load(ctx: Context, conf: dict[str, Any]) -> Settings:
    settings = config.load(conf)
    ctx.use(settings)
    return settings


def require_version(settings: Settings, minimum: str, command: str) -> None:
    """CHECK exists from spec 0.4.0, GC and STATUS from 1.1.0 (code 1 before that)."""
    if SUPPORTED_VERSIONS.index(settings.cni_version) < SUPPORTED_VERSIONS.index(minimum):
        raise errors.CniError(
            errors.INCOMPATIBLE_VERSION,
            f"config version {settings.cni_version} does not allow {command}",
        )


def cmd_del(ctx: Context, data: bytes) -> bytes:
    """DEL, decided from evidence first: see decide.py and del_flow.py."""
    from cni_delguard import del_flow

    return del_flow.run(ctx, data)


def cmd_add(ctx: Context, data: bytes) -> bytes:
    from cni_delguard import add_flow

    return add_flow.run(ctx, config.parse_json(data))


def cmd_forward(ctx: Context, data: bytes) -> bytes:
    """CHECK, GC and STATUS: forwarded faithfully (forward.py)."""
    from cni_delguard import forward

    return forward.run(ctx, config.parse_json(data))


def decision_fields(ev: decide.Evidence, decision: str, reason: str) -> dict[str, object]:
    return {"evidence": ev.names(), "decision": decision, "reason": reason}


def gather(ctx: Context, settings: Settings, conf: dict[str, Any]) -> decide.Evidence:
    return evidence.gather(
        settings, ctx.inv.container_id, ctx.inv.ifname, isinstance(conf.get("prevResult"), dict)
    )
