"""The fleet benchmark's Markdown report, written from the raw JSON alone.

A table per RTT, the targets, the reading, the breakdown, the machine and the notes, in
that order: the tables are ``tables.py``'s, the targets ``targets.py``'s, the reading and
the notes ``notes.py``'s. ``write_report`` writes it with the plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common.plot import plot
from bench.common.stats import cells
from bench.fleet.notes import notes, reading
from bench.fleet.tables import breakdown, machine_table, pod_work_table, rtt_tables
from bench.fleet.targets import pod_work_targets, targets


def report(raw: dict[str, Any]) -> str:
    """Return the Markdown report of the raw results: tables, targets, machine, notes."""
    settings = raw["settings"]
    rtts = settings["rtts_ms"]
    counts = settings["pod_counts"]
    table = cells(raw)
    m = raw["machine"]
    knee = 20 * int(m["cores"] or 1)  # pyinfra's default PARALLEL: 20 per CPU core

    lines = [
        "# Fleet speed: podstate against raw SSH, the same work with OpenSSH, plain pyinfra "
        "and Ansible",
        "",
        f"`make bench` (bench/fleet/run.py), {raw['started']}; sandbox pods reached through a "
        "latency proxy (bench/common/latency_proxy.py). Times are medians of "
        f"{settings['runs']} runs (Ansible: {settings['ansible_runs']}; the mixed fleet: "
        f"{settings.get('mixed_runs', 0)}), in seconds, from "
        "starting the command to its exit, on fresh SSH connections. Raw samples: "
        "[fleet.json](fleet.json); plot: [fleet.png](fleet.png).",
        "",
        "![time against pods](fleet.png)",
        "",
    ]
    lines += rtt_tables(table, counts, rtts)
    lines += targets(table, counts, rtts, knee, raw)
    lines += pod_work_table(raw.get("pod_work"))
    lines += reading(table, counts, rtts, raw)
    lines += breakdown(table, counts, rtts, raw.get("startup", {}))
    lines += machine_table(raw, knee)
    lines += notes(raw)
    return "\n".join(lines) + "\n"


def pod_work_page(raw: dict[str, Any]) -> str:
    """Return the Markdown page of the pods' own work measured alone
    (``python -m bench.fleet.podwork``): its targets, its tables and the machine."""
    m = raw.get("machine", {})
    lines = [
        "# The pods' own work: CPU and programs on one pod",
        "",
        f"`python -m bench.fleet.podwork --runs {raw['runs']}`, {raw.get('started', '?')}. "
        "Raw samples: [podwork.json](podwork.json).",
        "",
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        *pod_work_targets(raw),
        "",
        *pod_work_table(raw),
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores; kernel "
        f"{m.get('kernel', '?')}; Python {m.get('python', '?')}. The pods share the machine's "
        "cores with each other and with podstate's own process.",
    ]
    return "\n".join(lines) + "\n"


def write_report(raw: dict[str, Any], out: Path) -> None:
    """Write fleet.md and fleet.png under ``out`` from the raw results."""
    (out / "fleet.md").write_text(report(raw))
    plot(raw, out / "fleet.png")
