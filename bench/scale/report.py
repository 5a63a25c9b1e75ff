"""The scale benchmark's Markdown report: cost per pod, memory slope, shards."""

from __future__ import annotations

import os
import platform
import time

from bench.common.stats import slope


def _is_shard(run: str) -> bool:
    return "--shard" in run


def report(results: dict[int, dict[str, dict[str, float]]]) -> str:
    """Return the markdown report: every figure with its cost per pod, the memory slope per
    pod of each whole-fleet run, and each count's shards beside its whole check."""
    counts = sorted(results)
    lines = [
        "# Scale: one control process, many pods",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}. Sandbox pods share the control machine's cores.",
        f"Measured {time.strftime('%Y-%m-%d')} with `make bench-scale`; no added latency.",
        "",
        "| pods | run | exit | wall s | ms per pod | peak RSS MiB |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for pods in counts:
        for run, m in results[pods].items():
            if _is_shard(run):
                continue
            lines.append(
                f"| {pods} | {run} | {m['exit']} | {m['seconds']:.1f} "
                f"| {m['seconds'] * 1000 / pods:.0f} | {m['peak_mib']:.0f} |"
            )
    lines += ["", "Peak memory per extra pod (least-squares slope):", ""]
    whole = [run for run in results[counts[0]] if not _is_shard(run)]
    for run in whole:
        points = [(p, results[p][run]["peak_mib"]) for p in counts if run in results[p]]
        lines.append(
            f"- {run}: {slope(points) * 1024:.0f} KiB per pod"
            if len(points) > 1
            else f"- {run}: (one pod count)"
        )
    for pods in counts:
        shard_runs = {run: m for run, m in results[pods].items() if _is_shard(run)}
        if not shard_runs:
            continue
        full = results[pods]["check"]
        n = len(shard_runs)
        lines += [
            "",
            f"{pods} pods checked as {n} shards (`podstate check --shard K/{n}`), each "
            "timed alone, one after the other, as N CI runners would run them at once:",
            "",
            "| run | exit | wall s | of the whole check | peak RSS MiB |",
            "|---|---:|---:|---:|---:|",
            f"| whole fleet | {full['exit']} | {full['seconds']:.1f} | 1.00 "
            f"| {full['peak_mib']:.0f} |",
        ]
        for run, m in shard_runs.items():
            lines.append(
                f"| {run.removeprefix('check ')} | {m['exit']} | {m['seconds']:.1f} "
                f"| {m['seconds'] / full['seconds']:.2f} | {m['peak_mib']:.0f} |"
            )
        slowest = max(m["seconds"] for m in shard_runs.values())
        lines += [
            "",
            f"The slowest shard took {slowest / full['seconds']:.2f} of the whole check's "
            f"time (1/{n} = {1 / n:.2f} would be perfect).",
        ]
    ok = all(m["exit"] == 0 for r in results.values() for m in r.values())
    lines += ["", f"All runs succeeded on every pod: {'yes' if ok else 'NO'}."]
    return "\n".join(lines) + "\n"
