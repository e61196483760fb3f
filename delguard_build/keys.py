"""docs/configuration.md's table of the guard's config keys, rendered from the code.

    table()           the table (Markdown)
    rendered(page)    the page with the table between its markers replaced by the current one

The keys are the pydantic model's (cni_delguard/guard/models.py, GuardConf), minus the ones CNI
itself defines; the defaults are the ones a config that leaves a key out gets
(cni_delguard/guard/config.py, Defaults, from guard/defaults.py); the limits that a meaning quotes
(the allowed places, the log's size) are read from the modules that enforce them. Only each key's
meaning is prose, here: a key the model gains without a meaning here, or a meaning for a key the
model lost, stops the render (KeysError). The timeouts' values are not repeated: they and the rule
that sets them are docs/how-it-decides.md's "Timeouts". tools/render.py writes and checks it.
"""

from __future__ import annotations

import json

from cni_delguard.guard import config, defaults, log, models, paths

PAGE = "docs/configuration.md"  # relative to the repository
BEGIN = "<!-- keys:begin (tools/render.py --write keys renders this from the config model) -->"
END = "<!-- keys:end -->"

# CNI's own keys (the spec's network config): not the guard's to document.
CNI_KEYS = frozenset({"cniVersion", "name", "type", "capabilities", "runtimeConfig", "prevResult"})


def _places(prefixes: tuple[str, ...]) -> str:
    return " or ".join(f"`{p}`" for p in prefixes)


class KeysError(ValueError):
    """The model and the meanings here differ, or the page lacks its markers."""


def meanings() -> dict[str, str]:
    """Each guard key's meaning (Markdown, one table cell)."""
    mib = log.MAX_BYTES // (1024 * 1024)
    timeouts = models.Timeouts.model_fields
    return {
        "delegate": "required: the wrapped plugin's own config, untouched; found by its `type` in "
                    "`CNI_PATH`",
        "stateDir": "markers, locks, config verdicts; under "
                    f"{_places(paths.STATE_PREFIXES)}, every dir on the way root's and not "
                    "writable by group or others, no link followed "
                    "([the path rule](#the-path-rule))",
        "resultCacheDirs": "libcni result caches: `<dir>/<network>-<containerID>-<ifname>` is "
                           "evidence of a completed ADD",
        "multusCacheDirs": "multus caches: `<dir>/<containerID>` is evidence that multus saw an "
                           "ADD",
        "timeouts": "seconds per delegate call ("
                    + ", ".join(f"`{f.alias or n}`" for n, f in timeouts.items())
                    + "); on expiry the delegate's process group is killed",
        "lockTimeout": "seconds to wait for the attachment's lock (then code 11)",
        "logFile": f"JSON-lines decision log, rotated at {mib} MiB; `\"\"` turns it off; under "
                   f"{_places(paths.LOG_PREFIXES)}, its dir by the same rule as `stateDir`",
        "logLevel": "one of " + ", ".join(f"`{v}`" for v in _literal("logLevel")),
        "mode": "`observe`: forward every DEL as if the guard were not there and log what it "
                "would have decided (a cautious roll-out)",
    }


def _literal(key: str) -> tuple[str, ...]:
    annotation = models.GuardConf.model_fields[key].annotation
    return tuple(getattr(annotation, "__args__", ()))


def _number(value: float) -> float | int:
    return int(value) if value == int(value) else value


def _defaults() -> dict[str, str]:
    """The default of each optional key, as a config would spell it."""
    d = config.Defaults()
    values: dict[str, object] = {
        "stateDir": d.state_dir, "resultCacheDirs": list(d.result_cache_dirs),
        "multusCacheDirs": list(d.multus_cache_dirs), "lockTimeout": _number(d.lock_timeout),
        "logFile": d.log_file, "logLevel": d.log_level, "mode": defaults.MODE,
    }
    shown = {k: f"`{json.dumps(v)}`" for k, v in values.items()}
    shown["timeouts"] = "[Timeouts](how-it-decides.md#timeouts)"
    shown["delegate"] = "-"
    return shown


def table() -> str:
    keys = [k for k in models.GuardConf.model_fields if k not in CNI_KEYS]
    meaning, default = meanings(), _defaults()
    unexplained = sorted(set(keys) - set(meaning))
    gone = sorted(set(meaning) - set(keys))
    if unexplained or gone:
        raise KeysError(f"the config model's keys and delguard_build/keys.py's meanings differ: "
                        f"no meaning for {unexplained}, no key for {gone}")
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{k}` | {default[k]} | {meaning[k]} |" for k in keys]
    return "\n".join(rows) + "\n"


def rendered(page: str) -> str:
    """The page with the table between its markers replaced by the current one."""
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(END) < page.index(BEGIN):
        raise KeysError(f"{PAGE} needs one {BEGIN} and one {END} after it")
    before, rest = page.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}\n{table()}{END}{after}"
