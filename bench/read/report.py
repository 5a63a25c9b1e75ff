"""The read benchmark's Markdown report, from the raw JSON alone."""

from __future__ import annotations

import statistics
from typing import Any

from bench.read.measure import PATTERNS
from podstate.sizes import format_size


def _mib_s(seconds: float, total: int) -> str:
    return f"{total / seconds / 2**20:.0f} MiB/s"


def report(results: dict[str, Any]) -> str:
    """Return the Markdown report of a run: the table, the ratio, how it was measured."""
    total = results["files"] * results["size"]
    medians = {key: statistics.median(runs) for key, runs in results["passes"].items()}
    lines = [
        "# Read benchmark: large files from the network volume and from local disk",
        "",
        f"{results['files']} files of {format_size(results['size'])} "
        f"({format_size(total)} in all) of random bytes, each read once from start to end by "
        f"one process on a sandbox pod; medians of {results['repeat']} passes, the page cache "
        f"dropped before each. Network volume: sshfs behind a {results['rtt_ms']:g} ms "
        "round-trip link (the sandbox's stand-in for a RunPod network volume). Local disk: "
        f"files under the pod's root overlay, on the machine's own disk ({results['local_fs']}). "
        f"Machine: {results['machine']['cores']} cores, {results['machine']['cpu']}, "
        f"{results['machine']['memory_gib']} GiB. Run {results['date']} with "
        f"`{results['command']}`.",
        "",
        "| source | read(), 4 MiB calls | mmap, page by page |",
        "|---|---|---|",
    ]
    network = f"network volume (sshfs, {results['rtt_ms']:g} ms)"
    for where, name in (("network", network), ("local", "local disk")):
        cells = [
            f"{medians[f'{where}/{p}']:.2f} s ({_mib_s(medians[f'{where}/{p}'], total)})"
            for p in PATTERNS
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    ratios = [medians[f"network/{p}"] / medians[f"local/{p}"] for p in PATTERNS]
    lines.append(f"| **network / local** | **{ratios[0]:.1f}x** | **{ratios[1]:.1f}x** |")
    cached = max(results["cached_before_pass"])
    lines += [
        "",
        "Every pass: `sync`, `echo 3 > /proc/sys/vm/drop_caches` on the machine (the pod",
        "shares its kernel, so this empties the sshfs client's page cache, the storage",
        "server's and the local disk's), then `fincore` on the files: "
        + (
            "no page of them was cached before any pass."
            if cached == 0
            else f"at most {format_size(cached)} of them was still cached before a pass."
        ),
        "Network and local passes alternate in order, so neither always runs first.",
        "",
        "What it says and what it does not: the sandbox's volume is one sshfs connection, whose",
        "throughput over a round trip of this length is what the table shows, for read() and",
        "mmap alike. RunPod's network volumes are MooseFS, not sshfs, and are not measured",
        "here. The local disk is this machine's own disk, which on a virtual machine may be",
        "served from a cache below it: the fast end of what a container disk does.",
        "",
        "All passes (seconds): "
        + "; ".join(
            f"{key} " + ", ".join(f"{s:.2f}" for s in runs)
            for key, runs in results["passes"].items()
        )
        + ".",
    ]
    if results.get("note"):
        lines += ["", results["note"]]
    return "\n".join(lines) + "\n"
