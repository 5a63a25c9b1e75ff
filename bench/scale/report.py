"""The scale benchmark's Markdown report: cost per pod, where the time goes, memory slope,
the check split into shards run at once, and the targets."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

from bench.common.stats import slope

CHECK_S = 60.0  # a check of 500 pods from one process, at most (issue 56)
KIB_PER_POD = 100.0  # and its memory per pod


def _is_shard(run: str) -> bool:
    return "shards" in run


def _row(pods: int, run: str, m: dict[str, Any], cores: int) -> str:
    busy = m["machine_cpu_s"] / (m["seconds"] * cores)
    return (
        f"| {pods} | {run} | {m['exit']} | {m['seconds']:.1f} "
        f"| {m['seconds'] * 1000 / pods:.0f} | {m['client_cpu_s'] * 1000 / pods:.1f} "
        f"| {m['pods_cpu_s'] * 1000 / pods:.1f} | {busy:.0%} | {m['peak_mib']:.0f} |"
    )


def _where(pods: int, m: dict[str, Any], cores: int) -> list[str]:
    """Return where the check of ``pods`` pods spent its wall time, in a few lines."""
    client, own, busy = m["client_cpu_s"], m["pods_cpu_s"], m["machine_cpu_s"]
    waiting = m["seconds"] - busy / cores
    return [
        f"Where the check of {pods} pods spent its {m['seconds']:.1f} s: the control process "
        f"used {client:.1f} s of CPU ({client / m['seconds']:.0%} of one core), the pods "
        f"{own:.1f} s (their sshd and the probe), the whole machine {busy:.1f} s of its "
        f"{cores} cores' {m['seconds'] * cores:.1f} s; the rest, {max(waiting, 0):.1f} s of "
        "wall time with a core idle, is waiting (connections, the slowest pods' last round "
        "trips).",
    ]


def report(results: dict[int, dict[str, dict[str, Any]]]) -> str:
    """Return the markdown report: every run's figures per pod, the memory slope of each
    whole-fleet run, the largest count's shards beside its whole check, and the targets."""
    cores = os.cpu_count() or 1
    counts = sorted(results)
    runs = max(int(m.get("runs", 1)) for r in results.values() for m in r.values())
    header = (
        "| pods | run | exit | wall s | wall ms per pod | control CPU ms per pod "
        "| pods' CPU ms per pod | machine busy | peak RSS MiB |"
    )
    lines = [
        "# Scale: one control process, many pods",
        "",
        f"Machine: {cores} cores, {platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}. Sandbox pods (a pid namespace and cgroups "
        "each) share the control machine's cores.",
        f"Measured {time.strftime('%Y-%m-%d')} with `make bench-scale`, no added latency; "
        f"medians of {runs} (a first apply once).",
        "",
        "Control CPU is the `pyinfra` or `podstate` process's own (user and system, its "
        "children included); the pods' CPU is their cgroups' (each pod's sshd and every "
        "process it started); machine busy is the share of all cores' time not idle.",
        "",
        header,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for pods in counts:
        lines += [_row(pods, run, m, cores) for run, m in results[pods].items()]
    lines += ["", "Peak memory per extra pod (least-squares slope):", ""]
    slopes = {}
    for run in (r for r in results[counts[0]] if not _is_shard(r)):
        mib = slope([(p, results[p][run]["peak_mib"]) for p in counts if run in results[p]])
        if mib is not None:
            slopes[run] = mib * 1024
            lines.append(f"- {run}: {slopes[run]:.0f} KiB per pod")
    largest = counts[-1]
    full = results[largest]["check"]
    for run, m in results[largest].items():
        if _is_shard(run):
            lines.append(
                f"- {largest} pods, {run} at once: the slowest ended after "
                f"{m['seconds'] / full['seconds']:.2f} of the whole check's time"
            )
    lines += [
        "",
        *_where(largest, full, cores),
        "",
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    if largest >= 500:
        seconds = full["seconds"] * 500 / largest
        lines.append(
            f"| check of 500 pods from one process ≤ {CHECK_S:.0f} s | {seconds:.1f} s "
            f"| **{'met' if seconds <= CHECK_S else 'missed'}** |"
        )
    if "check" in slopes:
        kib = slopes["check"]
        lines.append(
            f"| memory ≤ {KIB_PER_POD:.0f} KiB a pod (check, slope) | {kib:.0f} KiB "
            f"| **{'met' if kib <= KIB_PER_POD else 'missed'}** |"
        )
    ok = all(m["exit"] == 0 for r in results.values() for m in r.values())
    lines += ["", f"All runs succeeded on every pod: {'yes' if ok else 'NO'}."]
    return "\n".join(lines) + "\n"
