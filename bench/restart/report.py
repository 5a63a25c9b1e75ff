"""The restart benchmark's figures and Markdown report, from the raw JSON alone."""

from __future__ import annotations

import statistics
from typing import Any

TARGET_S = 45.0  # the issue's: every restarted pod ready again within 45 s


def summary(raw: dict[str, Any]) -> dict[str, Any]:
    """Return the figures of a run: every restarted pod's time to ready (None: not ready in
    time), their median and max, the floor (interval + the references' median apply) and
    the ratios to it, and whether every pod was ready within the target."""
    times = [p["seconds"] for c in raw["cycles"] for p in c["pods"].values()]
    done = [t for t in times if t is not None]
    apply_s = statistics.median(r["apply"]["seconds"] for r in raw["references"])
    floor = raw["settings"]["interval_s"] + apply_s
    median = statistics.median(done) if done else None
    most = max(done) if len(done) == len(times) and done else None  # unknown if any missing
    return {
        "samples": len(times),
        "not_ready": len(times) - len(done),
        "failed_applies": sum(
            p.get("failed", 0) for c in raw["cycles"] for p in c["pods"].values()
        ),
        "median_s": median,
        "max_s": most,
        "reference_apply_s": apply_s,
        "floor_s": floor,
        "median_ratio": None if median is None else median / floor,
        "max_ratio": None if most is None else most / floor,
        "target_s": TARGET_S,
        "met": most is not None and most <= TARGET_S,
    }


def fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def report(raw: dict[str, Any]) -> str:
    """Return the Markdown report of the raw results."""
    s, settings, m = summary(raw), raw["settings"], raw["machine"]
    applies = ", ".join(fmt(r["apply"]["seconds"], 2) for r in raw["references"])
    lines = [
        "# Restarts: time until `podstate watch` has a restarted pod ready again",
        "",
        f"`make bench-restart` (bench/restart/), {raw['started']}: {settings['pods']} sandbox "
        f"pods at {settings['rtt_ms']:g} ms RTT (bench/common/latency_proxy.py, the RunPod API "
        f"behind it too), `podstate watch --json` at its default interval "
        f"({settings['interval_s']:g} s), {settings['restarted']} pods restarted one after the "
        f"other in each of {len(raw['cycles'])} cycles. Time from a pod's SSH being up again "
        f"(`container.restart` returned) to `podstate-ready` exiting 0 on it (polled on the pod "
        f"every {settings['poll_s']:g} s). Raw: [restart.json](restart.json).",
        "",
        "| | seconds |",
        "|---|---|",
        f"| restarted pods, median | {fmt(s['median_s'])} |",
        f"| restarted pods, max | {fmt(s['max_s'])} |",
        f"| floor: interval + one apply of {settings['restarted']} restarted pods "
        f"({applies} s, median {fmt(s['reference_apply_s'], 2)}) | {fmt(s['floor_s'])} |",
        f"| *median / floor* | {fmt(s['median_ratio'], 2)} |",
        f"| *max / floor* | {fmt(s['max_ratio'], 2)} |",
        "",
        f"Target: every restarted pod ready again within {s['target_s']:g} s, with no human: "
        + ("**met**" if s["met"] else "**not met**")
        + (f" ({s['not_ready']} of {s['samples']} not ready)" if s["not_ready"] else "")
        + f"; {s['failed_applies']} failed applies in the watch.",
        "",
        "## Each cycle",
        "",
        "Restarts land at evenly spread points of the watch's interval (the lead: how long "
        "before its next listing the pods' SSH was up), so the cycles sample the whole "
        "interval; the first lands just after a listing, the worst case: the pods wait the "
        "whole interval, then the apply (the floor). *Wait*: from SSH up to the start of the "
        "pass that applied; *listing + apply*: from there to ready.",
        "",
        "| cycle | lead, s | pod | pass | wait, s | listing + apply, s | ready after, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for number, c in enumerate(raw["cycles"], 1):
        for name, p in c["pods"].items():
            wait = p.get("wait_s")
            rest = None if p["seconds"] is None or wait is None else p["seconds"] - wait
            check = " (check)" if p.get("check_pass") else ""
            lines.append(
                f"| {number} | {c['lead_s']:.0f} | {name} | {p.get('pass', '–')}{check} | "
                f"{fmt(wait)} | {fmt(rest)} | {fmt(p['seconds'])} |"
            )
    converge = raw.get("converge", {}).get("seconds")
    commands = max(r["apply"]["commands"]["max"] for r in raw["references"])
    lines += [
        "",
        "## Parameters",
        "",
        f"- Pods: {settings['pods']}, converged first ({fmt(converge, 2)} s); restarted "
        f"per cycle: {settings['restarted']} (every fourth pod, a different quarter each "
        "cycle); the reference apply's pods (the last quarter) restarted and applied to "
        "by hand, before the watch started and after it stopped, with the command a watch "
        f"pass runs (at most {commands} remote commands per pod).",
        "- Desired state: the shipped `deploy/pod.py` and group_vars less `venv` (as in "
        "`make bench`: a venv would be built from the network), pod-3's `shm.min_size` "
        "32M. Sandbox pods restart in a few tenths of a second; on RunPod the container "
        "start comes first, and the time here counts from SSH up.",
        f"- Watch exit status after SIGTERM: {raw.get('watch_status', '–')}.",
        f"- Machine: {m['cores']} cores, {m['cpu']}, {m['memory_gib']} GiB, Linux "
        f"{m['kernel']}, Python {m['python']}, pyinfra {m['pyinfra']}, paramiko "
        f"{m['paramiko']}; load {raw['load_before']:.2f} before, "
        f"{fmt(raw.get('load_after'), 2)} after; {fmt(raw.get('elapsed_s'), 0)} s in all.",
        "",
    ]
    return "\n".join(lines)
