"""The table on stdout and the JSON file: the benchmark's one output boundary."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

Row = tuple[str, str, str, str, str, str, str]
HEADER: Row = (
    "scenario / subject",
    "median ms",
    "p90 ms",
    "CPU ms",
    "peak RSS MiB",
    "vs reference",
    "target",
)


def machine() -> dict[str, Any]:
    cpu = ""
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("inf")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def skip_targets(skip: dict[str, Any]) -> dict[str, Any]:
    guard, loop = skip["guard skip-path DEL"], skip["loopback DEL"]
    python = skip["Debian python3.11 -I -S -c pass"]
    vs_loop = ratio(guard["median_ms"], loop["median_ms"])
    vs_python = ratio(guard["median_cpu_ms"], python["median_cpu_ms"])
    return {
        # CPU time: what a retry storm costs the node; the same ratio of wall times is reported.
        "cpu_vs_debian_python": vs_python,
        "median_vs_debian_python": ratio(guard["median_ms"], python["median_ms"]),
        "cpu_vs_bundle_interpreter": ratio(
            guard["median_cpu_ms"], skip["the bundle's interpreter, bare"]["median_cpu_ms"]
        ),
        "python_target": f"<= 1.25x Debian's bare python3 (CPU): {verdict(vs_python <= 1.25)}",
        "median_vs_loopback": vs_loop,
        "median_vs_floor": ratio(guard["median_ms"], skip["static floor"]["median_ms"]),
        # Steadier than wall time when other work shares the machine; reported, not the target.
        "cpu_vs_loopback": ratio(guard["median_cpu_ms"], loop["median_cpu_ms"]),
        "rss_target": f"<= 12 MiB: {verdict(guard['peak_rss_mib'] <= 12)}",
        "correct": guard["failures"] == 0 and skip["guard stdout not empty"] == 0,
    }


def netns_targets(res: dict[str, Any]) -> dict[str, Any]:
    alone = res["bridge alone: ADD+DEL"]["median_ms"]
    cached = res["guard, verdict cached: ADD+DEL"]["median_ms"]
    first = res["guard, first ADD after config change: ADD"]["median_ms"]
    overhead = round(cached - alone, 2)
    return {
        "add_del_overhead_ms": overhead,
        "first_add_overhead_ms": round(first - res["bridge alone: ADD"]["median_ms"], 2),
        "overhead_target": f"<= 32 ms: {verdict(overhead <= 32)}",
    }


def storm_targets(res: dict[str, Any]) -> dict[str, Any]:
    guard, loop = res["guard"], res["loopback"]
    share = ratio(guard["throughput_per_s"], loop["throughput_per_s"])
    tmp = guard["leftovers_in_tmp"]
    clean = not (
        guard["leftovers_in_state_dir"] or tmp["in_private_tmpdir"] or tmp["in_system_tmp"]
    )
    return {
        "throughput_vs_loopback": share,
        "errors_target": f"0 errors: {verdict(guard['errors'] == 0)}",
        "leftovers_target": f"0 leftovers: {verdict(clean)}",
        "throughput_target": f">= 0.25x loopback: {verdict(share >= 0.25)}",
    }


def rows_for(results: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    if "skip" in results:
        rows += skip_rows(results["skip"], results["targets"]["skip"])
    if "netns" in results and "skipped" not in results["netns"]:
        rows += netns_rows(results["netns"], results["targets"]["netns"])
    if "storm" in results:
        rows += storm_rows(results["storm"], results["targets"]["storm"])
    return rows


def series_row(label: str, s: dict[str, Any], versus: str = "", target: str = "") -> Row:
    return (
        label,
        f"{s['median_ms']:.2f}",
        f"{s['p90_ms']:.2f}",
        f"{s['median_cpu_ms']:.2f}",
        f"{s['peak_rss_mib']:.1f}",
        versus,
        target,
    )


def skip_rows(res: dict[str, Any], tgt: dict[str, Any]) -> list[Row]:
    return [
        series_row(
            "a. skip-path DEL: guard",
            res["guard skip-path DEL"],
            f"{tgt['median_vs_loopback']}x loopback (CPU {tgt['cpu_vs_loopback']}x), "
            f"{tgt['median_vs_floor']}x floor",
            f"RSS {tgt['rss_target']}",
        ),
        series_row(
            "a. skip-path DEL: guard, against Python",
            res["guard skip-path DEL"],
            f"{tgt['cpu_vs_debian_python']}x Debian's python3 CPU "
            f"({tgt['median_vs_debian_python']}x wall), "
            f"{tgt['cpu_vs_bundle_interpreter']}x its own interpreter CPU",
            tgt["python_target"],
        ),
        series_row("a. Debian python3.11 -I -S -c pass", res["Debian python3.11 -I -S -c pass"]),
        series_row("a. the bundle's interpreter, bare", res["the bundle's interpreter, bare"]),
        series_row("a. loopback DEL (Go)", res["loopback DEL"]),
        series_row("a. static floor (C)", res["static floor"]),
    ]


def netns_rows(res: dict[str, Any], tgt: dict[str, Any]) -> list[Row]:
    rows = []
    for name in ("bridge alone", "guard, verdict cached", "guard, first ADD after config change"):
        for part in ("ADD", "DEL", "ADD+DEL"):
            versus = target = ""
            if name == "guard, verdict cached" and part == "ADD+DEL":
                versus = f"+{tgt['add_del_overhead_ms']} ms"
                target = f"overhead {tgt['overhead_target']}"
            if name.startswith("guard, first") and part == "ADD":
                versus = f"+{tgt['first_add_overhead_ms']} ms (reported, no target)"
            rows.append(series_row(f"b. {name}: {part}", res[f"{name}: {part}"], versus, target))
    return rows


def storm_rows(res: dict[str, Any], tgt: dict[str, Any]) -> list[Row]:
    rows = []
    for name in ("guard", "loopback"):
        s = res[name]
        label = f"c. storm {s['execs']} DELs x{s['parallel']}: {name}"
        versus = f"{s['throughput_per_s']}/s in {s['wall_s']} s, {s['errors']} errors"
        target = ""
        if name == "guard":
            versus += f", {tgt['throughput_vs_loopback']}x loopback"
            target = (
                f"{tgt['throughput_target']}; {tgt['errors_target']}; {tgt['leftovers_target']}"
            )
        rows.append(series_row(label, s, versus, target))
    return rows


def table(rows: list[Row]) -> str:
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [HEADER, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def emit(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(table(rows_for(results)))
    print(f"\nmachine: {json.dumps(results['machine'])}")
    print(f"results: {out}")
