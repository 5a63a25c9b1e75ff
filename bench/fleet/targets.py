"""The fleet report's targets: each goal of the issue, what was measured and whether it is
met."""

from __future__ import annotations

import math
from typing import Any

from bench.common.stats import Cell, fmt, ratio, step_excess
from bench.fleet.podwork_figures import derived
from bench.fleet.tables import slow_extra

# Targets from the issue: ratios at 150 ms RTT for 24 and 48 pods, commands per pod.
TARGET_RTT_MS = 150.0
TARGET_PODS = (24, 48)
TARGET_CHECK_FLOOR = 1.10
TARGET_NOOP_FLOOR = 1.15
TARGET_RECONFIGURE_FLOOR = 1.35
TARGET_FIRST_FLOOR = 1.5
TARGET_SAME_WORK = 1.05
TARGET_APPLY_COMMANDS = 2
TARGET_ANSIBLE_CHECK = 10.0
TARGET_PLAIN = 3.0
TARGET_SLOW_EXTRA_S = 1.1
# CPU seconds (the pod's own cgroup's count, on each GPU shape and with 1, 20 and 200
# declared files beside 0 and 200 more processes) and programs on one pod: the probe's
# programs count sshd's and the login shell's (the whole check's); the fold's, those it
# starts beyond the check's
TARGET_POD_WORK = {"probe": (0.020, 10), "fold of a reconfigure": (0.025, 15)}
TARGET_NVIDIA_SMI_CALLS = 1
TARGET_CHECK_COMMANDS = 1
TARGET_NOOP_COMMANDS = 1
TARGET_DEPLOYS_ADD_S = 0.1  # pyinfra with podstate's deploy files, over an empty deploy


def _verdict(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[ok]


def pod_work_targets(pod_work: dict[str, Any]) -> list[str]:
    """Return the rows of the targets on one pod's own work: the CPU of the probe and of the
    fold on each pod of each GPU shape and in each cell of the grid (declared files, other
    processes), all of which must meet it; and the programs each GPU shape's started."""
    pods = pod_work.get("pods", {})
    cells = {}
    for cell in pod_work.get("grid", []):
        files = f"{cell['files']} file" + ("s" if cell["files"] != 1 else "")
        cells[f"{files}, {cell['processes']} more processes"] = cell["measures"]
    rows = []
    for name, (cpu_limit, program_limit) in TARGET_POD_WORK.items():
        cpu = {
            where: found
            for where, m in {**pods, **cells}.items()
            if (found := derived(m)[name]["cpu_s"]) is not None
        }
        ok = all(c <= cpu_limit for c in cpu.values()) if cpu else None
        rows.append(
            f"| CPU on one pod, {name} ≤ {1000 * cpu_limit:g} ms | "
            + (", ".join(f"{1000 * c:.0f} ms on {where}" for where, c in cpu.items()) or "–")
            + f" | {_verdict(ok)} |"
        )
        programs = {pod: derived(m)[name]["programs"] for pod, m in pods.items()}
        if name == "probe":  # sshd's and the login shell's programs too
            programs = {pod: m["check"]["programs"] for pod, m in pods.items()}
        ok = all(n <= program_limit for n in programs.values()) if programs else None
        rows.append(
            f"| programs started on one pod, {name} ≤ {program_limit} | "
            + (", ".join(f"{n} on {pod}" for pod, n in programs.items()) or "–")
            + f" | {_verdict(ok)} |"
        )
    return rows


def overhead_ratio(plain: Cell | None, ours: Cell | None, floor: Cell | None) -> float | None:
    """Return (plain - floor) / (ours - floor): how many times podstate's time over the floor
    plain pyinfra's is, which stays meaningful when both are near the floor; inf when
    podstate's median is at or below the floor's; None when one was not measured."""
    if plain is None or ours is None or floor is None:
        return None
    if ours.median <= floor.median:
        return math.inf
    return (plain.median - floor.median) / (ours.median - floor.median)


def targets(
    table: dict, counts: list[int], rtts: list[float], knee: int, raw: dict[str, Any]
) -> list[str]:
    """Return the Markdown section that says whether each target of the issue is met, and for
    a ratio to the floor that is missed, what the same work with OpenSSH took."""
    rows = []
    first_connection = raw.get("first_connection", {})

    def at(step: str, rtt: float, pods: int) -> Cell | None:
        return table.get((step, rtt, pods))

    def ratios(top: str, bottom: str) -> dict[int, float | None]:
        return {
            n: ratio(at(top, TARGET_RTT_MS, n), at(bottom, TARGET_RTT_MS, n)) for n in TARGET_PODS
        }

    def verdict(found: dict[int, float | None], ok: Any) -> tuple[str, bool | None]:
        measured = [r for r in found.values() if r is not None]
        if len(measured) < len(found):
            return ", ".join(f"{fmt(r)} at {n} pods" for n, r in found.items()), None
        return ", ".join(f"{fmt(r)} at {n} pods" for n, r in found.items()), all(
            ok(r) for r in measured
        )

    where = f"at {', '.join(map(str, TARGET_PODS))} pods, {TARGET_RTT_MS:g} ms"
    pod_work = raw.get("pod_work") or {}
    calls = [m["check"].get("nvidia_smi") for m in pod_work.get("pods", {}).values()]
    calls = [c for c in calls if c is not None]
    ok = all(c <= TARGET_NVIDIA_SMI_CALLS for c in calls) if calls else None
    rows.append(
        f"| `nvidia-smi` calls per check, container probed before ≤ {TARGET_NVIDIA_SMI_CALLS} | "
        + (f"at most {max(calls)}" if calls else "–")
        + f" | {_verdict(ok)} |"
    )
    extra = {n: slow_extra(lambda *k: at(*k), TARGET_RTT_MS, n) for n in TARGET_PODS}
    shown, ok = verdict(extra, lambda e: e <= TARGET_SLOW_EXTRA_S)
    rows.append(
        f"| check with a 1 s `nvidia-smi` less check with the fast one ≤ "
        f"{TARGET_SLOW_EXTRA_S:g} s, {where} | {shown} | {_verdict(ok)} |"
    )
    rows += pod_work_targets(pod_work)
    for name, top, limit in (
        ("check", "check", TARGET_CHECK_FLOOR),
        ("noop apply", "noop", TARGET_NOOP_FLOOR),
        ("reconfigure", "reconfigure", TARGET_RECONFIGURE_FLOOR),
        ("first apply", "first", TARGET_FIRST_FLOOR),
    ):
        found = ratios(top, "floor")
        shown, ok = verdict(found, lambda r, limit=limit: r <= limit)
        if ok is False:
            same = ratios(f"same_{top}", "floor")
            highest = max(r for r in found.values() if r)
            shown += (
                f" (over by {100 * (highest / limit - 1):.0f} %; the same work with OpenSSH: "
                f"{', '.join(fmt(r) for r in same.values())} of the floor)"
            )
        rows.append(f"| {name} / floor ≤ {limit}, {where} | {shown} | {_verdict(ok)} |")
    for name, top in (
        ("check", "check"),
        ("noop apply", "noop"),
        ("reconfigure", "reconfigure"),
        ("first apply", "first"),
    ):
        shown, ok = verdict(ratios(top, f"same_{top}"), lambda r: r <= TARGET_SAME_WORK)
        if ok is False:
            cpus = [
                (n, at(top, TARGET_RTT_MS, n), at(f"same_{top}", TARGET_RTT_MS, n))
                for n in TARGET_PODS
            ]
            shown += (
                " (CPU of podstate's process and of the replay's OpenSSH clients: "
                + ", ".join(
                    f"{a.cpu:.2f} and {b.cpu:.2f} s at {n} pods"
                    for n, a, b in cpus
                    if a and b and a.cpu is not None and b.cpu is not None
                )
                + ")"
            )
        rows.append(
            f"| {name} / same work ≤ {TARGET_SAME_WORK:g}, {where} | {shown} | {_verdict(ok)} |"
        )
    for name, top, bottom in (
        ("noop", "plain_noop", "noop"),
        ("reconfigure", "plain_reconfigure", "reconfigure"),
    ):
        overheads = {
            n: overhead_ratio(*(at(step, TARGET_RTT_MS, n) for step in (top, bottom, "floor")))
            for n in TARGET_PODS
        }
        measured = {n: r for n, r in overheads.items() if r is not None}
        ok = all(r >= TARGET_PLAIN for r in measured.values()) if measured else None
        shown = ", ".join(
            f"{'podstate at the floor' if r == math.inf else fmt(r)} at {n} pods"
            for n, r in measured.items()
        )
        rows.append(
            f"| plain pyinfra's overhead over the floor / podstate's, {name} ≥ "
            f"{TARGET_PLAIN:g}, {where} | {shown or '–'} | {_verdict(ok)} |"
        )
    ansible_ratios = {
        n: ratio(at("ansible", TARGET_RTT_MS, n), at("check", TARGET_RTT_MS, n)) for n in counts
    }
    measured = [r for r in ansible_ratios.values() if r is not None]
    ok = all(r >= TARGET_ANSIBLE_CHECK for r in measured) if measured else None
    rows.append(
        f"| ansible / check ≥ {TARGET_ANSIBLE_CHECK:g} ({TARGET_RTT_MS:g} ms) | "
        + (", ".join(f"{fmt(r)} at {n} pods" for n, r in ansible_ratios.items() if r) or "–")
        + f" | {_verdict(ok)} |"
    )
    empty = first_connection.get("pyinfra, empty deploy")
    apply, check = first_connection.get("pyinfra apply"), first_connection.get("podstate check")
    ok = None if None in (empty, apply) else apply - empty <= TARGET_DEPLOYS_ADD_S
    rows.append(
        "| start-up, to the first SSH connection attempt: `pyinfra inventories/pods.py "
        f"deploy/*.py` ≤ the same with an empty deploy + {TARGET_DEPLOYS_ADD_S:g} s | "
        + (f"{apply:.2f} s against {empty:.2f} s" if ok is not None else "–")
        + f" | {_verdict(ok)} |"
    )
    ok = None if None in (empty, check) else check <= empty
    rows.append(
        "| start-up: `podstate check` no later than plain pyinfra's CLI (the empty deploy) | "
        + (f"{check:.2f} s against {empty:.2f} s" if ok is not None else "–")
        + f" | {_verdict(ok)} |"
    )
    for name, step, limit in (
        ("converged pod, check", "check", TARGET_CHECK_COMMANDS),
        ("converged pod, noop apply", "noop", TARGET_NOOP_COMMANDS),
        ("pod, reconfigure", "reconfigure", TARGET_APPLY_COMMANDS),
        ("fresh pod, first apply", "first", TARGET_APPLY_COMMANDS),
    ):
        worst = max((c.commands_max for (s, _, _), c in table.items() if s == step), default=None)
        ok = None if worst is None else worst <= limit
        rows.append(f"| remote commands per {name} ≤ {limit} | at most {worst} | {_verdict(ok)} |")
    growth = []
    growth_ok: bool | None = None
    for rtt in (r for r in rtts if r > 0):
        for step in ("check", "noop"):
            points = [(n, c.median) for n in counts if (c := at(step, rtt, n))]
            excess = step_excess(points, knee)
            if excess is None:
                continue
            pods, seconds = excess
            floor_points = [(n, c.median) for n in counts if (c := at("floor", rtt, n))]
            floor_excess = step_excess(floor_points, knee)
            linear = seconds <= 2 * rtt / 1000
            growth_ok = linear if growth_ok is None else growth_ok and linear
            growth.append(
                f"{step} {rtt:g} ms: {seconds:+.2f} s at {pods} pods"
                + (f" (floor {floor_excess[1]:+.2f} s)" if floor_excess else "")
            )
    rows.append(
        f"| no faster than linear, no step past pyinfra's default parallelism ({knee} "
        "here): time at the largest count above the line through the two counts below, "
        f"at most 2 RTT | {'; '.join(growth) or '–'} | {_verdict(growth_ok)} |"
    )
    return ["## Targets", "", "| target | measured | verdict |", "|---|---|---|", *rows, ""]
