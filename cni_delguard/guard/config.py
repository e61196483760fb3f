"""Reading the guard's config: a lenient peek for DEL, full validation for everything else.

DEL must decide before it trusts anything: a config that cannot be parsed must not block the
removal of a sandbox that never had a network. `peek` reads only the keys that locate evidence and
falls back to the defaults for anything malformed.

Full validation goes through models.py (pydantic, the one schema). Its verdict is stored
(verdict.py), so later execs re-derive the settings with the schema's field rules and read a small
JSON file instead of importing pydantic; the file is never what the settings are taken from.

A config nested deeper than MAX_NESTING is refused at parsing (code 6): the digest and the
delegate's config re-encode it, and Python's encoder recurses once per level.
"""

from __future__ import annotations

import os

from cni_delguard import SUPPORTED_VERSIONS, __version__
from cni_delguard.cni import errors, jsonlite
from cni_delguard.cni.skel import valid_network
from cni_delguard.guard import defaults, verdict
from cni_delguard.state import fsutil

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Keys the runtime fills per call; they do not change what the config means to the guard.
_VOLATILE = ("runtimeConfig", "prevResult", "cni.dev/valid-attachments", "args")
# Real configs are a few levels deep (multus's delegates, a plugin list, ipam, routes: about 8).
# CPython's encoder and decoder recurse once per level and stop at its recursion limit (1000),
# counted from the caller's own depth: half of it leaves room whoever encodes.
MAX_NESTING = 500


def parse_json(data: bytes) -> dict[str, Any]:
    """stdin -> a JSON object, or CniError code 6."""
    try:
        conf = jsonlite.loads(data)
    except (ValueError, RecursionError) as exc:
        raise errors.CniError(
            errors.DECODING_FAILURE, "cannot decode network configuration", str(exc)[:200]
        ) from None
    if not isinstance(conf, dict):
        raise errors.CniError(errors.DECODING_FAILURE, "network configuration is not an object")
    if nesting(conf) > MAX_NESTING:
        raise errors.CniError(
            errors.DECODING_FAILURE,
            f"network configuration is nested deeper than {MAX_NESTING} levels",
        )
    return conf


def nesting(value: object) -> int:
    """How many objects and arrays deep `value` goes, counted without recursion (one pass,
    stopping at MAX_NESTING + 1)."""
    deepest = 0
    if not isinstance(value, (dict, list)):
        return 0
    todo: list[tuple[dict[str, Any] | list[Any], int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        children = item.values() if isinstance(item, dict) else item
        todo.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def check_version(conf: dict[str, Any]) -> str:
    """The config's cniVersion, if this plugin speaks it (code 1 otherwise)."""
    version = conf.get("cniVersion")
    if not isinstance(version, str) or version not in SUPPORTED_VERSIONS:
        raise errors.CniError(
            errors.INCOMPATIBLE_VERSION,
            f"incompatible CNI versions; config is {version!r}, "
            f"plugin supports {list(SUPPORTED_VERSIONS)}",
        )
    return version


class Defaults:
    """The values a config gets for the keys it leaves out (DEL's peek: for keys it cannot read).

    The guard's own are guard/defaults.py's, read when the object is made. They reach the pydantic
    model as an argument, never as class attributes fixed at its import, so a test gives its own
    (dirs under tmp_path) by passing them in, and two sets of defaults in one process stay apart.
    """

    __slots__ = (
        "lock_timeout",
        "log_file",
        "log_level",
        "multus_cache_dirs",
        "result_cache_dirs",
        "state_dir",
        "timeouts",
    )

    def __init__(
        self,
        *,
        state_dir: str | None = None,
        result_cache_dirs: tuple[str, ...] | None = None,
        multus_cache_dirs: tuple[str, ...] | None = None,
        timeouts: dict[str, float] | None = None,
        lock_timeout: float | None = None,
        log_file: str | None = None,
        log_level: str | None = None,
    ) -> None:
        d = defaults
        self.state_dir = d.STATE_DIR if state_dir is None else state_dir
        self.result_cache_dirs = (
            d.RESULT_CACHE_DIRS if result_cache_dirs is None else result_cache_dirs
        )
        self.multus_cache_dirs = (
            d.MULTUS_CACHE_DIRS if multus_cache_dirs is None else multus_cache_dirs
        )
        self.timeouts = dict(d.TIMEOUTS, **(timeouts or {}))
        self.lock_timeout = d.LOCK_TIMEOUT if lock_timeout is None else lock_timeout
        self.log_file = d.LOG_FILE if log_file is None else log_file
        self.log_level = d.LOG_LEVEL if log_level is None else log_level

    def conf(self) -> dict[str, Any]:
        """The defaults as the config keys they stand for (what validation fills in)."""
        return {
            "stateDir": self.state_dir,
            "resultCacheDirs": list(self.result_cache_dirs),
            "multusCacheDirs": list(self.multus_cache_dirs),
            "timeouts": dict(self.timeouts),
            "lockTimeout": self.lock_timeout,
            "logFile": self.log_file,
            "logLevel": self.log_level,
        }


class Peek:
    """What DEL needs to look for evidence, read without trusting the config."""

    __slots__ = (
        "log_file",
        "log_level",
        "multus_cache_dirs",
        "network",
        "observe",
        "prev_result",
        "result_cache_dirs",
        "state_dir",
    )

    def __init__(self, conf: dict[str, Any], *, dflt: Defaults | None = None) -> None:
        dflt = dflt or Defaults()
        name = conf.get("name")
        self.network = name if isinstance(name, str) and valid_network(name) else ""
        self.state_dir = _abs_or(conf.get("stateDir"), dflt.state_dir)
        self.result_cache_dirs = _abs_list_or(conf.get("resultCacheDirs"), dflt.result_cache_dirs)
        self.multus_cache_dirs = _abs_list_or(conf.get("multusCacheDirs"), dflt.multus_cache_dirs)
        log_file = conf.get("logFile")
        self.log_file = log_file if log_file == "" else _abs_or(log_file, dflt.log_file)
        level = conf.get("logLevel")
        self.log_level = level if isinstance(level, str) else dflt.log_level
        self.prev_result = isinstance(conf.get("prevResult"), dict)
        self.observe = conf.get("mode") == defaults.OBSERVE


def _abs_or(value: object, default: str) -> str:
    if isinstance(value, str) and value.startswith("/") and "\0" not in value:
        return os.path.normpath(value)
    return default


def _abs_list_or(value: object, default: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(path for v in value if (path := _abs_or(v, "")))
    return default


class Settings:
    """The validated, normalized guard settings (built from models.validate or a verdict)."""

    __slots__ = (
        "cni_version",
        "delegate_capabilities",
        "delegate_type",
        "lock_timeout",
        "log_file",
        "log_level",
        "make_state_dir",
        "mode",
        "multus_cache_dirs",
        "network",
        "result_cache_dirs",
        "state_dir",
        "timeouts",
    )

    def __init__(self, d: dict[str, Any], make_state_dir: bool = False) -> None:
        self.network: str = d["network"]
        self.cni_version: str = d["cniVersion"]
        self.state_dir: str = d["stateDir"]
        self.result_cache_dirs: tuple[str, ...] = tuple(d["resultCacheDirs"])
        self.multus_cache_dirs: tuple[str, ...] = tuple(d["multusCacheDirs"])
        self.timeouts: dict[str, float] = dict(d["timeouts"])
        self.lock_timeout: float = d["lockTimeout"]
        self.log_file: str = d["logFile"]
        self.log_level: str = d["logLevel"]
        self.delegate_type: str = d["delegateType"]
        self.delegate_capabilities: tuple[str, ...] = tuple(d["delegateCapabilities"])
        self.mode: str = d["mode"]
        # Whether the state dir is missing and the guard may create it (config.check_paths).
        self.make_state_dir = make_state_dir


def digest(conf: dict[str, Any], *, dflt: Defaults | None = None) -> str:
    """The verdict's key: the config, and what it was completed with (the defaults)."""
    stable = {k: v for k, v in conf.items() if k not in _VOLATILE}
    filled = (dflt or Defaults()).conf()
    text = jsonlite.dumps([__version__, stable, filled], sort_keys=True, compact=True)
    return fsutil.sha256_hex(text.encode("utf-8", "surrogatepass"))


def load(conf: dict[str, Any], cni_path: str = "", *, dflt: Defaults | None = None) -> Settings:
    """Validate `conf` (a whole guard config with name and cniVersion), sparing pydantic when a
    trusted verdict agrees (verdict.py). `cni_path` is where an admin's widened path rule is
    found (paths.py)."""
    dflt = dflt or Defaults()
    check_version(conf)
    _check_volatile(conf)
    state_dir = _abs_or(conf.get("stateDir"), dflt.state_dir)
    log_file = _abs_or(conf.get("logFile"), "")
    check_paths(state_dir, log_file, cni_path)
    key = digest(conf, dflt=dflt)
    filled = dflt.conf()
    normalized = verdict.read(state_dir, key, conf, filled)
    if normalized is not None:
        return Settings(normalized, missing_dirs(state_dir, log_file, cni_path, dflt))
    from cni_delguard.guard import models

    normalized = models.validate(conf, filled)
    make_state_dir = missing_dirs(state_dir, log_file, cni_path, dflt)
    verdict.write(state_dir, key, normalized, make_state_dir)
    return Settings(normalized, make_state_dir)


def check_paths(state_dir: str, log_file: str, cni_path: str, *, on_disk: bool = True) -> None:
    """The path rule (paths.py), checked before anything is created under either path: code 7
    outside the allowed places or past the bounds; with `on_disk`, the log's dir as far as it
    exists walked as the log's write walks it (fsutil.walk: no link, each dir ours and not
    writable by others), code 5: a log refused there fails the command, never only its record.
    The state dir is walked by every open of it (fsutil.walk), which fails ADD with code 5 and
    STATUS with 50."""
    from cni_delguard.guard import paths

    for kind, path in (("state", state_dir), ("log", log_file)):
        why = paths.refusal(kind, path, cni_path) if path else None
        if why is not None:
            raise errors.CniError(errors.INVALID_CONFIG, "invalid cni-delguard configuration", why)
    if on_disk and log_file:
        try:
            fsutil.check_walk(os.path.dirname(log_file))
        except fsutil.UnsafeDirError as exc:
            raise errors.CniError(errors.IO_FAILURE, f"log dir {exc.path} is unusable: {exc.why}",
                                  "the logFile's dir is refused (docs/configuration.md)") from None


def missing_dirs(state_dir: str, log_file: str, cni_path: str, dflt: Defaults) -> bool:
    """Code 7 for a missing state dir or log dir the guard may not create (paths.creatable: only
    its own defaults, and a leaf of an existing dir in a place the admin named); True when the
    state dir is missing and may be created (by the command's first open of it). Costs one walk
    of each path that exists (an unsafe one is refused where it is opened, with the reason)."""
    if log_file:
        log_dir = os.path.dirname(log_file)
        if _missing(log_dir):
            _may_create("log", log_dir, cni_path, os.path.dirname(dflt.log_file))
    if _missing(state_dir):
        _may_create("state", state_dir, cni_path, dflt.state_dir)
        return True
    return False


def _missing(path: str) -> bool:
    try:
        os.close(fsutil.walk(path))
    except FileNotFoundError:
        return True
    except errors.CniError:
        return False
    return False


def _may_create(kind: str, path: str, cni_path: str, builtin: str) -> None:
    from cni_delguard.guard import paths

    if paths.creatable(kind, path, cni_path, builtin) and not _missing(os.path.dirname(path)):
        return  # (a missing parent: only a leaf is ever made)
    raise errors.CniError(
        errors.INVALID_CONFIG,
        f"{kind} dir {path} does not exist",
        "the guard creates only its own default dirs, and a config's dir only as a new leaf in "
        "an existing dir in a place the admin named (cni-delguard.paths; docs/configuration.md)",
    )


def _check_volatile(conf: dict[str, Any]) -> None:
    """The per-call keys are not part of the cached verdict, so they are checked every time."""
    if not isinstance(conf.get("runtimeConfig", {}), dict):
        raise errors.CniError(errors.INVALID_CONFIG, "runtimeConfig must be an object")
    prev = conf.get("prevResult")
    if prev is not None and not isinstance(prev, dict):
        raise errors.CniError(errors.INVALID_CONFIG, "prevResult must be an object")
    delegate = conf.get("delegate")
    if not isinstance(delegate, dict):
        raise errors.CniError(errors.INVALID_CONFIG, "delegate must be an object with a type")


def validate_plugin_conf(
    conf: dict[str, Any],
    network: str,
    cni_version: str,
    *,
    dflt: Defaults | None = None,
    cni_path: str | None = None,
) -> Settings:
    """Validate a guard plugin config as it stands in a conflist (for the installer and tests);
    with `cni_path`, the path rule as the guard will apply it there."""
    full = dict(conf, name=network, cniVersion=cni_version)
    check_version(full)
    from cni_delguard.guard import models

    settings = Settings(models.validate(full, (dflt or Defaults()).conf()))
    if cni_path is not None:  # the node's paths, not this process's: the rule only
        check_paths(settings.state_dir, settings.log_file, cni_path, on_disk=False)
    return settings
