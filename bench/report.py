"""The fleet benchmark's Markdown report, written from the raw JSON alone.

A table per RTT, the targets, the reading, the breakdown, the machine and the notes;
``write_report`` writes it with the plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.plot import plot
from bench.stats import Cell, cells, ratio, slope, step_excess

STEPS = ("floor", "check", "noop", "reconfigure", "first", "ansible")
LABELS = {
    "floor": "floor: `ssh pod true`, every pod at once",
    "check": "`podstate check`, converged",
    "noop": "noop apply, converged",
    "reconfigure": "apply of one `env` value changed on every pod",
    "first": "first apply, fresh pods",
    "ansible": "Ansible `--check`, converged ¹",
}
# Targets from the issue: ratios at 150 ms RTT for 24 and 48 pods, commands per pod.
TARGET_RTT_MS = 150.0
TARGET_PODS = (24, 48)
TARGET_CHECK_FLOOR = 1.2
TARGET_NOOP_FLOOR = 1.2
TARGET_RECONFIGURE_FLOOR = 1.3
TARGET_FIRST_FLOOR = 1.5
TARGET_APPLY_COMMANDS = 2
TARGET_ANSIBLE_CHECK = 5.0
TARGET_CHECK_COMMANDS = 1
TARGET_NOOP_COMMANDS = 1
TARGET_FIRST_CONNECTION_S = 0.2


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


def report(raw: dict[str, Any]) -> str:
    """Return the Markdown report of the raw results: tables, targets, machine, notes."""
    settings = raw["settings"]
    rtts = settings["rtts_ms"]
    counts = settings["pod_counts"]
    table = cells(raw)
    m = raw["machine"]
    knee = 20 * int(m["cores"] or 1)  # pyinfra's default PARALLEL: 20 per CPU core

    def cell(step: str, rtt: float, pods: int) -> Cell | None:
        return table.get((step, rtt, pods))

    lines = [
        "# Fleet speed: podstate against raw SSH and Ansible",
        "",
        f"`make bench` (bench/run.py), {raw['started']}; sandbox pods reached through a "
        "latency proxy (bench/latency_proxy.py). Times are medians of "
        f"{settings['runs']} runs (Ansible: {settings['ansible_runs']}), in seconds, from "
        "starting the command to its exit, on fresh SSH connections. Raw samples: "
        "[fleet.json](fleet.json); plot: [fleet.png](fleet.png).",
        "",
        "![time against pods](fleet.png)",
        "",
    ]
    for rtt in rtts:
        title = f"## {rtt:g} ms RTT" + (
            " (no added latency: the local work alone)" if rtt == 0 else ""
        )
        lines += [title, "", "| step | " + " | ".join(f"{n} pods" for n in counts)]
        lines[-1] += f" | {counts[-1]}/{counts[0]} | slope, ms/pod | commands/pod |"
        lines.append("|---" * (len(counts) + 4) + "|")
        for step in STEPS:
            row = [cell(step, rtt, n) for n in counts]
            if not any(row):
                continue
            points = [(n, c.median) for n, c in zip(counts, row, strict=True) if c]
            commands = max((c.commands_max for c in row if c), default=None)
            lines.append(
                f"| {LABELS[step]} | "
                + " | ".join(_fmt(c.median if c else None) for c in row)
                + f" | {_fmt(ratio(row[-1], row[0]))}"
                + f" | {_fmt(_ms(slope(points)), 1)} | {commands} |"
            )
        for name, top, bottom in (
            ("check / floor", "check", "floor"),
            ("noop / floor", "noop", "floor"),
            ("reconfigure / floor", "reconfigure", "floor"),
            ("first apply / floor", "first", "floor"),
            ("ansible / check", "ansible", "check"),
        ):
            ratios = [ratio(cell(top, rtt, n), cell(bottom, rtt, n)) for n in counts]
            if any(r is not None for r in ratios):
                lines.append(f"| *{name}* | " + " | ".join(_fmt(r) for r in ratios) + " | | | |")
        lines.append("")
    lines += _targets(table, counts, rtts, knee, raw.get("first_connection", {}))
    lines += _reading(table, counts, rtts, raw)
    lines += _breakdown(table, counts, rtts, raw.get("startup", {}))
    lines += _machine(raw, knee)
    lines += _notes(raw)
    return "\n".join(lines) + "\n"


def _verdict(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[ok]


def _targets(
    table: dict, counts: list[int], rtts: list[float], knee: int, first_connection: dict
) -> list[str]:
    """Return the Markdown section that says whether each target of the issue is met."""
    rows = []

    def at(step: str, rtt: float, pods: int) -> Cell | None:
        return table.get((step, rtt, pods))

    for name, top, limit in (
        ("check", "check", TARGET_CHECK_FLOOR),
        ("noop apply", "noop", TARGET_NOOP_FLOOR),
        ("reconfigure", "reconfigure", TARGET_RECONFIGURE_FLOOR),
        ("first apply", "first", TARGET_FIRST_FLOOR),
    ):
        ratios = {
            n: ratio(at(top, TARGET_RTT_MS, n), at("floor", TARGET_RTT_MS, n)) for n in TARGET_PODS
        }
        measured = [r for r in ratios.values() if r is not None]
        ok = all(r <= limit for r in measured) if len(measured) == len(TARGET_PODS) else None
        shown = ", ".join(f"{_fmt(r)} at {n} pods" for n, r in ratios.items())
        if ok is False:
            worst = max(measured)
            shown += f" (over by {100 * (worst / limit - 1):.0f} %)"
        rows.append(
            f"| {name} / floor ≤ {limit} at {', '.join(map(str, TARGET_PODS))} pods, "
            f"{TARGET_RTT_MS:g} ms | {shown} | {_verdict(ok)} |"
        )
    ansible_ratios = {
        n: ratio(at("ansible", TARGET_RTT_MS, n), at("check", TARGET_RTT_MS, n)) for n in counts
    }
    measured = [r for r in ansible_ratios.values() if r is not None]
    ok = all(r >= TARGET_ANSIBLE_CHECK for r in measured) if measured else None
    rows.append(
        f"| ansible / check ≥ {TARGET_ANSIBLE_CHECK:g} ({TARGET_RTT_MS:g} ms) | "
        + ", ".join(f"{_fmt(r)} at {n} pods" for n, r in ansible_ratios.items() if r)
        + f" | {_verdict(ok)} |"
    )
    times = first_connection.values()
    ok = all(t <= TARGET_FIRST_CONNECTION_S for t in times) if first_connection else None
    rows.append(
        f"| start-up: from process start to the first SSH connection attempt ≤ "
        f"{TARGET_FIRST_CONNECTION_S:g} s | "
        + (", ".join(f"`{c}` {t:.2f} s" for c, t in first_connection.items()) or "–")
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
            points = [(n, at(step, rtt, n).median) for n in counts if at(step, rtt, n)]
            excess = step_excess(points, knee)
            if excess is None:
                continue
            pods, seconds = excess
            floor_points = [(n, at("floor", rtt, n).median) for n in counts if at("floor", rtt, n)]
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


def _reading(table: dict, counts: list[int], rtts: list[float], raw: dict[str, Any]) -> list[str]:
    """Return the section that explains the ratios from the measured parts: start-up, CPU."""
    startup = raw.get("startup", {})
    cores = raw["machine"]["cores"]
    top = max(rtts)
    few, many = counts[0], counts[-1]
    lines = ["## Reading the figures", ""]
    ours = startup.get("podstate --help")
    if ours is not None:
        per_rtt = ", ".join(f"{ours / (r / 1000):.1f} RTT at {r:g} ms" for r in rtts if r > 0)
        few_ratios = ", ".join(
            f"{_fmt(ratio(table.get(('check', r, few)), table.get(('floor', r, few))))} at {r:g} ms"
            for r in rtts
            if r > 0
        )
        lines.append(
            f"- **Fixed cost.** podstate starts in {ours:.2f} s (Python with pyinfra, "
            f"paramiko and gevent imported), `ssh` in {startup.get('ssh -V', 0):.2f} s: "
            f"{per_rtt}. That is why check/floor is highest with few pods and short RTTs "
            f"({few} pods: {few_ratios}), and shrinks as the fleet grows."
        )
    floor_cell, check_cell = table.get(("floor", top, many)), table.get(("check", top, many))
    if floor_cell and check_cell and floor_cell.cpu is not None and check_cell.cpu is not None:
        lines.append(
            f"- **The floor is CPU-bound here from a few dozen pods.** At {many} pods and "
            f"{top:g} ms, the {many} OpenSSH clients used {floor_cell.cpu:.2f} s of CPU "
            f"({1000 * floor_cell.cpu / many:.0f} ms each: process start, post-quantum key "
            f"exchange, signature), podstate's one process {check_cell.cpu:.2f} s for the "
            f"whole check, on {cores} cores that the pods' sshd share. So at 24 and 48 pods "
            "the floor measures this machine's CPU as much as the network, and a ratio near "
            "or below 1 says that paramiko's handshake is cheaper than OpenSSH's, not that "
            "podstate beats the network; with few pods, where the round trips dominate, the "
            "ratios above are the honest comparison."
        )
    shares = [
        (label, c)
        for label, step in (
            ("the floor", "floor"),
            ("the check", "check"),
            ("the noop apply", "noop"),
            ("the reconfigure", "reconfigure"),
            ("the first apply", "first"),
        )
        if (c := table.get((step, top, few))) and c.machine_cpu is not None and c.cpu is not None
    ]
    if shares:
        lines.append(
            f"- **The pods' own work runs on the same cores.** At {few} pods and {top:g} ms, "
            f"this machine's {cores} cores worked "
            + ", ".join(
                f"{c.machine_cpu:.2f} s during {label} ({c.cpu:.2f} s of it in the command "
                "measured)"
                for label, c in shares
            )
            + ". The rest is the pods' sshd, their shells and the commands run on them (the "
            "probe; for an apply, the changes) and the latency proxy. Here it competes with "
            "the tool measured for the same cores; each real pod has CPUs of its own."
        )
    ansible_cell = table.get(("ansible", top, many))
    if ansible_cell and check_cell and ansible_cell.cpu is not None:
        bound = ansible_cell.cpu / cores
        lines.append(
            f"- **Ansible, without the shared cores.** At {many} pods and {top:g} ms, "
            f"`ansible-playbook` and its forks alone used {ansible_cell.cpu:.1f} s of CPU on "
            f"the control machine ({ansible_cell.cpu / many:.2f} s per pod; not counting the "
            f"Python it starts on the pods), so even with pods of their own it needs at least "
            f"{bound:.1f} s on {cores} cores: {bound / check_cell.median:.1f} × podstate's "
            f"check ({check_cell.median:.2f} s)."
        )
    first, noop = table.get(("first", top, few)), table.get(("noop", top, few))
    if top > 0 and first and noop and first.commands_max > noop.commands_max:
        extra = first.commands_max - noop.commands_max
        lines.append(
            f"- **A change costs a round trip.** A first apply runs up to "
            f"{first.commands_max} remote commands per pod, {extra} more than a noop apply (all "
            f"of podstate's changes in one): at {top:g} ms and {few} pods it takes "
            f"{first.median - noop.median:.2f} s longer "
            f"({(first.median - noop.median) / extra / (top / 1000):.1f} RTT per extra command; "
            "the rest is the changes' own work on the pods)."
        )
    return lines + [""]


def _breakdown(
    table: dict, counts: list[int], rtts: list[float], startup: dict[str, float]
) -> list[str]:
    """Return the section that splits each time into local work and sequential round trips.

    At 0 ms the time is local work only (process start, imports, inventory, crypto for
    every pod on this machine's cores); what a run at RTT r adds over it, divided by r,
    is how many round trips the step waits for one after the other.
    """
    if 0.0 not in rtts or not any(r > 0 for r in rtts):
        return []
    lines = [
        "## Where the time goes",
        "",
        "Local work is the time at 0 ms RTT: process start-up, imports, inventory and "
        "desired-state validation, SSH crypto for every pod, and the pods' own work (sshd, "
        "shells, the probe), all on this machine's cores. Round trips are (time at RTT − "
        "time at 0 ms) / RTT: how many network round trips the step waits for one after "
        "the other; a lower bound where local work overlaps the waiting. Process start-up "
        "alone (median of 3, no pod contacted): "
        + ", ".join(f"`{cmd}` {secs:.2f} s" for cmd, secs in startup.items())
        + ".",
        "",
        "| step | "
        + " | ".join(f"local work, {n} pods" for n in counts)
        + " | "
        + " | ".join(f"round trips at {r:g} ms, {n} pods" for r in rtts if r > 0 for n in counts)
        + " | "
        + " | ".join(f"client CPU s, {n} pods" for n in counts)
        + " |",
        "|---" * (1 + len(counts) * (2 + sum(1 for r in rtts if r > 0))) + "|",
    ]
    for step in STEPS:
        base = [table.get((step, 0.0, n)) for n in counts]
        if not any(base):
            continue
        trips = []
        for rtt in (r for r in rtts if r > 0):
            for n, b in zip(counts, base, strict=True):
                c = table.get((step, rtt, n))
                trips.append(_fmt((c.median - b.median) / (rtt / 1000), 1) if c and b else "–")
        top = max(rtts)
        cpus = [table.get((step, top, n)) for n in counts]
        lines.append(
            f"| {LABELS[step]} | "
            + " | ".join(_fmt(b.median if b else None) for b in base)
            + " | "
            + " | ".join(trips)
            + " | "
            + " | ".join(_fmt(c.cpu if c else None) for c in cpus)
            + " |"
        )
    return lines + [
        "",
        f"Client CPU is the CPU time (user + system, at {max(rtts):g} ms) of the tool's own "
        "processes on the control machine: the Python process of podstate and pyinfra, "
        "one `ssh` per pod for the floor, `ansible-playbook` and its forks (not the "
        "ControlPersist masters); the pods' side (sshd, shells, Python for Ansible) runs on "
        "the same cores and is not included.",
        "",
    ]


def _machine(raw: dict[str, Any], knee: int) -> list[str]:
    m, s = raw["machine"], raw["settings"]
    loads = [x["load_before"] for x in raw["samples"]]
    return [
        "## Machine and settings",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {m['cpu']}, {m['cores']} cores |",
        f"| memory | {m['memory_gib']} GiB |",
        f"| kernel | {m['kernel']} |",
        f"| Python | {m['python']} |",
        f"| pyinfra / paramiko | {m['pyinfra']} / {m['paramiko']} |",
        f"| ansible-core | {m['ansible-core']} |",
        f"| OpenSSH client | {m['openssh']} |",
        f"| RTTs | {', '.join(f'{r:g} ms' for r in s['rtts_ms'])} |",
        f"| pod counts | {', '.join(map(str, s['pod_counts']))} |",
        f"| runs | {s['runs']} (Ansible: {s['ansible_runs']}, at non-zero RTTs) |",
        f"| pyinfra's default parallelism here | {knee} (20 per core; podstate sets its own) |",
        f"| load average before cycles | {min(loads):.1f} to {max(loads):.1f} |"
        if loads
        else "| load average | – |",
        f"| total time | {raw.get('elapsed_s', 0) / 60:.1f} min |",
        "",
    ]


def _notes(raw: dict[str, Any]) -> list[str]:
    return [
        "## Notes",
        "",
        "¹ **Ansible here runs on the same cores as the pods.** Every sandbox pod is a "
        "process tree on this machine, so the Python interpreter Ansible starts on every "
        "pod for every task (16 per pod here, with pipelining), and the worker process it "
        "forks per pod and task on the controller, compete for the same "
        f"{raw['machine']['cores']} cores. That penalizes tools that start Python on every "
        "pod for every task far more than real pods would, whose CPUs are their own; read "
        "the Ansible figures as an upper bound of what Ansible costs against real pods.",
        "",
        "- **Fleet.** Sandbox pods (podstate/sandbox.py): a real sshd per pod in its own "
        "namespaces, shapes cycling through the five of the README. The desired state is "
        "the shipped `inventories/group_vars` without any `venv` key (a venv is built from "
        "the network), plus `host_vars/pod-3.yaml` with `shm: {min_size: 32M}` so that pod-3's "
        "64 MiB /dev/shm is not a violation and every pod converges cleanly.",
        "- **Latency.** bench/latency_proxy.py, one asyncio process for all pods, holds each "
        "chunk RTT/2 in each direction, in order, without a throughput cap, and opens the "
        "upstream connection 1.5 RTT after the client's, so a connection costs what a TCP "
        "handshake costs. It runs at a higher CPU priority than the tools measured, since it "
        "stands for the network.",
        "- **Floor.** `ssh -F /dev/null -o BatchMode=yes -o ControlMaster=no pod true`, one "
        "OpenSSH client per pod, all started at once; the time until the last one exits.",
        "- **Steps.** In each cycle, on fresh pods: first apply, floor, `podstate check`, "
        "noop apply, an apply once one `env` value has changed for every pod (reconfigure), "
        "then Ansible's check (`ansible-playbook --check bench/ansible/fleet.yml`"
        ", forks = pods, pipelining, ControlPersist, no fact gathering; its ControlPersist "
        "masters are closed before it, so it starts from fresh connections too). Before "
        "Ansible's check, the two ~/.bashrc blocks Ansible's `blockinfile` adds next to "
        "podstate's own are written into each pod, so that Ansible too checks a fleet "
        "converged on its own terms; the run asserts its check would change nothing.",
        "- **Commands per pod** are exec requests counted in each pod's sshd log "
        "(`Starting session: command for`), the most any pod got in any run.",
        "- **Ratios** are ratios of medians; slopes are least-squares fits of the medians.",
        "- Other work on the machine during the run (the load averages above) slows every "
        "step alike; the cycles are interleaved so that it spreads over all settings.",
        "",
    ]


def write_report(raw: dict[str, Any], out: Path) -> None:
    """Write fleet.md and fleet.png under ``out`` from the raw results."""
    (out / "fleet.md").write_text(report(raw))
    plot(raw, out / "fleet.png")
