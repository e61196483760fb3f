#!/usr/bin/env python3
"""render-config-keys.py: docs/configuration.md's table of the guard's config keys, from the code.

    tools/render-config-keys.py            print the table
    tools/render-config-keys.py --write    write it into docs/configuration.md, between its markers
    tools/render-config-keys.py --check    exit 1 with a diff when the page holds another table

The keys are the pydantic model's (cni_delguard/guard/models.py, GuardConf), minus the ones CNI
itself defines; the defaults are the ones a config that leaves a key out gets
(cni_delguard/guard/config.py, Defaults, from guard/defaults.py); the limits that a meaning quotes
(the allowed places, the log's size) are read from the modules that enforce them. Only each key's
meaning is prose, here: a key the model gains without a meaning here, or a meaning for a key the
model lost, stops the render. The timeouts' values are not repeated: they and the rule that sets
them are docs/how-it-decides.md's "Timeouts". tests/test_docs.py runs --check's comparison.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cni_delguard.guard import config, defaults, log, models, paths  # noqa: E402 (this checkout)

PAGE = REPO / "docs" / "configuration.md"
BEGIN = ("<!-- keys:begin (tools/render-config-keys.py --write renders this from the config "
         "model) -->")
END = "<!-- keys:end -->"

# CNI's own keys (the spec's network config): not the guard's to document.
CNI_KEYS = frozenset({"cniVersion", "name", "type", "capabilities", "runtimeConfig", "prevResult"})


def _places(prefixes: tuple[str, ...]) -> str:
    return " or ".join(f"`{p}`" for p in prefixes)


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
        raise SystemExit(f"{__file__}: the model's keys and the meanings here differ: "
                         f"no meaning for {unexplained}, no key for {gone}")
    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{k}` | {default[k]} | {meaning[k]} |" for k in keys]
    return "\n".join(rows) + "\n"


def rendered(page: str) -> str:
    """The page with the table between its markers replaced by the current one."""
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(END) < page.index(BEGIN):
        raise SystemExit(f"{PAGE.relative_to(REPO)} needs one {BEGIN} and one {END} after it")
    before, rest = page.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}\n{table()}{END}{after}"


def diff(page: str) -> str:
    """What --write would change ("" when the page holds the current table)."""
    return "".join(difflib.unified_diff(page.splitlines(keepends=True),
                                        rendered(page).splitlines(keepends=True),
                                        str(PAGE.relative_to(REPO)), "rendered from the model"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="write the table into the page")
    what.add_argument("--check", action="store_true", help="exit 1 when the page differs")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    if args.write:
        PAGE.write_text(rendered(page), encoding="utf-8")
    elif args.check:
        changes = diff(page)
        sys.stdout.write(changes)
        return 1 if changes else 0
    else:
        sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
