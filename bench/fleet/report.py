"""The fleet benchmark's Markdown report, written from the raw JSON alone.

A table per RTT, the targets, the reading, the breakdown, the machine and the notes;
``write_report`` writes it with the plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common.plot import plot
from bench.common.stats import Cell, cells, ratio, slope, step_excess
from bench.fleet.podwork import PODS as PODWORK_PODS
from bench.fleet.podwork import derived

STEPS = (
    "floor",
    "check",
    "same_check",
    "check_slow",
    "noop",
    "same_noop",
    "noop_slow",
    "reconfigure",
    "same_reconfigure",
    "first",
    "same_first",
    "plain_noop",
    "plain_reconfigure",
    "ansible",
    "mixed_floor",
    "mixed_check",
)
LABELS = {
    "floor": "floor: `ssh pod true`, every pod at once",
    "check": "`podstate check`, converged",
    "same_check": "same work: the check's commands with OpenSSH ²",
    "check_slow": "`podstate check`, 1 s `nvidia-smi` ³",
    "noop": "noop apply, converged",
    "same_noop": "same work: the noop's commands with OpenSSH ²",
    "noop_slow": "noop apply, 1 s `nvidia-smi` ³",
    "reconfigure": "apply of one `env` value changed on every pod",
    "same_reconfigure": "same work: the reconfigure's commands with OpenSSH ²",
    "first": "first apply, fresh pods",
    "same_first": "same work: the first apply's commands with OpenSSH ²",
    "plain_noop": "plain pyinfra, noop ⁴",
    "plain_reconfigure": "plain pyinfra, one `env` value changed ⁴",
    "ansible": "Ansible `--check`, converged ¹",
    "mixed_floor": "mixed fleet's floor: `ssh pod true`, every pod and instance at once ⁵",
    "mixed_check": "mixed fleet: `podstate check`, half of it Vast instances ⁵",
}
# Targets from the issue: ratios at 150 ms RTT for 24 and 48 pods, commands per pod.
TARGET_RTT_MS = 150.0
TARGET_PODS = (24, 48)
TARGET_CHECK_FLOOR = 1.15
TARGET_NOOP_FLOOR = 1.2
TARGET_RECONFIGURE_FLOOR = 1.35
TARGET_FIRST_FLOOR = 1.5
TARGET_SAME_WORK = 1.05
TARGET_APPLY_COMMANDS = 2
TARGET_ANSIBLE_CHECK = 10.0
TARGET_PLAIN = 3.0
TARGET_SLOW_EXTRA_S = 1.1
TARGET_POD_CPU_S = 0.025
TARGET_NVIDIA_SMI_CALLS = 1
TARGET_CHECK_COMMANDS = 1
TARGET_NOOP_COMMANDS = 1
TARGET_FIRST_CONNECTION_S = 0.2
# (name, step, the step it is compared with) of each ratio the tables show
RATIOS = (
    ("check / floor", "check", "floor"),
    ("noop / floor", "noop", "floor"),
    ("reconfigure / floor", "reconfigure", "floor"),
    ("first apply / floor", "first", "floor"),
    ("check / same work", "check", "same_check"),
    ("noop / same work", "noop", "same_noop"),
    ("reconfigure / same work", "reconfigure", "same_reconfigure"),
    ("first apply / same work", "first", "same_first"),
    ("plain pyinfra / podstate, noop", "plain_noop", "noop"),
    ("plain pyinfra / podstate, reconfigure", "plain_reconfigure", "reconfigure"),
    ("ansible / check", "ansible", "check"),
    ("mixed fleet: check / its floor", "mixed_check", "mixed_floor"),
)


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
        "# Fleet speed: podstate against raw SSH, the same work with OpenSSH, plain pyinfra "
        "and Ansible",
        "",
        f"`make bench` (bench/run.py), {raw['started']}; sandbox pods reached through a "
        "latency proxy (bench/latency_proxy.py). Times are medians of "
        f"{settings['runs']} runs (Ansible: {settings['ansible_runs']}; the mixed fleet: "
        f"{settings.get('mixed_runs', 0)}), in seconds, from "
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
        for name, top, bottom in RATIOS:
            ratios = [ratio(cell(top, rtt, n), cell(bottom, rtt, n)) for n in counts]
            if any(r is not None for r in ratios):
                lines.append(f"| *{name}* | " + " | ".join(_fmt(r) for r in ratios) + " | | | |")
        extra = [_slow_extra(cell, rtt, n) for n in counts]
        if any(e is not None for e in extra):
            lines.append(
                "| *check, 1 s `nvidia-smi`, less check (s)* | "
                + " | ".join(_fmt(e) for e in extra)
                + " | | | |"
            )
        lines.append("")
    lines += _targets(table, counts, rtts, knee, raw)
    lines += _pod_work(raw.get("pod_work"))
    lines += _reading(table, counts, rtts, raw)
    lines += _breakdown(table, counts, rtts, raw.get("startup", {}))
    lines += _machine(raw, knee)
    lines += _notes(raw)
    return "\n".join(lines) + "\n"


def _slow_extra(cell: Any, rtt: float, pods: int) -> float | None:
    """Return how much longer a check took with a slow nvidia-smi, in seconds."""
    slow, fast = cell("check_slow", rtt, pods), cell("check", rtt, pods)
    return slow.median - fast.median if slow and fast else None


def _verdict(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[ok]


def _targets(
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
            return ", ".join(f"{_fmt(r)} at {n} pods" for n, r in found.items()), None
        return ", ".join(f"{_fmt(r)} at {n} pods" for n, r in found.items()), all(
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
    extra = {n: _slow_extra(lambda *k: at(*k), TARGET_RTT_MS, n) for n in TARGET_PODS}
    shown, ok = verdict(extra, lambda e: e <= TARGET_SLOW_EXTRA_S)
    rows.append(
        f"| check with a 1 s `nvidia-smi` less check with the fast one ≤ "
        f"{TARGET_SLOW_EXTRA_S:g} s, {where} | {shown} | {_verdict(ok)} |"
    )
    for name in ("probe", "fold of a reconfigure"):
        cpus = {pod: derived(m)[name]["cpu_s"] for pod, m in pod_work.get("pods", {}).items()}
        known = [c for c in cpus.values() if c is not None]
        ok = all(c <= TARGET_POD_CPU_S for c in known) if known else None
        rows.append(
            f"| CPU on one pod, {name} ≤ {1000 * TARGET_POD_CPU_S:g} ms | "
            + (
                ", ".join(f"{1000 * c:.0f} ms on {pod}" for pod, c in cpus.items() if c is not None)
                or "–"
            )
            + f" | {_verdict(ok)} |"
        )
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
            shown += (
                f" (over by {100 * (max(found.values()) / limit - 1):.0f} %; the same work with "
                f"OpenSSH: {', '.join(_fmt(r) for r in same.values())} of the floor)"
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
        shown, ok = verdict(ratios(top, bottom), lambda r: r >= TARGET_PLAIN)
        rows.append(
            f"| plain pyinfra / podstate, {name} ≥ {TARGET_PLAIN:g}, {where} | {shown} | "
            f"{_verdict(ok)} |"
        )
    ansible_ratios = {
        n: ratio(at("ansible", TARGET_RTT_MS, n), at("check", TARGET_RTT_MS, n)) for n in counts
    }
    measured = [r for r in ansible_ratios.values() if r is not None]
    ok = all(r >= TARGET_ANSIBLE_CHECK for r in measured) if measured else None
    rows.append(
        f"| ansible / check ≥ {TARGET_ANSIBLE_CHECK:g} ({TARGET_RTT_MS:g} ms) | "
        + (", ".join(f"{_fmt(r)} at {n} pods" for n, r in ansible_ratios.items() if r) or "–")
        + f" | {_verdict(ok)} |"
    )
    times = first_connection.values()
    ok = all(t <= TARGET_FIRST_CONNECTION_S for t in times) if first_connection else None
    rows.append(
        f"| start-up (reported, not a target of this issue): from process start to the first "
        f"SSH connection attempt ≤ {TARGET_FIRST_CONNECTION_S:g} s | "
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


def _pod_work(found: dict[str, Any] | None) -> list[str]:
    """Return the section on the pods' own work: CPU and programs on one pod."""
    if not found:
        return []
    lines = [
        "## The pods' own work",
        "",
        f"On one sandbox pod, without added latency, podstate run against it alone (medians "
        f"of {found['runs']}; bench/podwork.py): the CPU time of everything the pod's sshd "
        "started (its cgroup's count) and the programs started (strace on the sshd: its "
        "re-exec for the connection and the login shell included). The probe is a check less "
        "`ssh pod true`; the fold of a reconfigure is the reconfigure less the check.",
        "",
        "| pod | measure | CPU, ms | programs |",
        "|---|---|---|---|",
    ]
    for pod, measures in found["pods"].items():
        shape = PODWORK_PODS.get(pod, "")
        for name, m in [*measures.items(), *derived(measures).items()]:
            cpu = m.get("cpu_s")
            lines.append(
                f"| {pod} ({shape}) | {name} | {'–' if cpu is None else f'{1000 * cpu:.1f}'} | "
                f"{m['programs']} |"
            )
    lines.append("")
    for pod, measures in found["pods"].items():
        for name, m in derived(measures).items():
            if m.get("by_program"):
                shown = ", ".join(f"{program} {n}" for program, n in m["by_program"].items())
                lines.append(f"- {pod}, {name}: {shown}.")
    return lines + [
        "",
        "Of a fold's programs, the pod lock's are scripts/lock.sh's: its `sh`, a `date` at "
        "each reading of the time (the take, and each step's renewal), a `flock` for each "
        "of its atomic moments, the `rm` and `mkdir` of taking it; each file a fold writes "
        "costs a `base64`, an `mv`, a `sha256sum` and, for podstate's own files, a `stat` "
        "(the write proving itself).",
        "",
    ]


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
    same = table.get(("same_check", top, many))
    if same and check_cell and same.cpu is not None and check_cell.cpu is not None:
        lines.append(
            f"- **The same work, without podstate.** At {many} pods and {top:g} ms, the check's "
            f"own commands sent with OpenSSH took {same.median:.2f} s, podstate's check "
            f"{check_cell.median:.2f} s: the OpenSSH clients used {same.cpu:.2f} s of CPU (a "
            f"process per command, a master per pod), podstate's one process "
            f"{check_cell.cpu:.2f} s. What either takes above the floor is the pods' work, on "
            "these cores."
        )
    plain_noop, noop_cell = table.get(("plain_noop", top, few)), table.get(("noop", top, few))
    if top > 0 and plain_noop and noop_cell:
        lines.append(
            f"- **Plain pyinfra waits for round trips.** It sends up to "
            f"{plain_noop.commands_max} commands per pod for a noop (a fact or an operation's "
            f"check at a time), podstate {noop_cell.commands_max}: at {top:g} ms and {few} pods "
            f"its noop took {plain_noop.median / (top / 1000):.0f} RTT, podstate's "
            f"{noop_cell.median / (top / 1000):.0f}. Its time grows slowly with the pods; "
            "podstate's, bound here by this machine's CPU, grows faster, so the ratio falls with "
            "the fleet."
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
        "² **Same work.** Each podstate step runs with its remote commands recorded (their "
        "stdin and exit status; bench/record); the same commands are then sent with plain "
        "OpenSSH, one ControlMaster connection per pod, every pod at once, each pod's in "
        "their order, from the state the step found (a check and a noop at once after it; a "
        "reconfigure after an apply back to the state before it; the first apply on pods "
        "restarted, so with fresh container disks). Every command must end as it did for "
        "podstate, and a check afterwards must be clean. The only change: the pod lock's count "
        "that podstate's probe read is not compared by the replay's take. What podstate takes "
        "over this is podstate's own process; what this takes over the floor is the pods' work.",
        "",
        "³ **A slow `nvidia-smi`.** The same check and noop apply, with every call of the "
        "sandbox's `nvidia-smi` taking 1 s (the bench's `--nvidia-smi-delay`), as NVML's start "
        "does on a multi-GPU host without persistence mode; the containers were probed before.",
        "",
        "⁴ **Plain pyinfra.** bench/plain_pyinfra/deploy.py: the same scratch, dirs, profile "
        "(same content), NCCL variables and ~/.bashrc hooks as pyinfra operations and facts "
        "(`files.directory`, `server.mount`, `files.put`, `files.block`, `Command`, "
        "`FileContents`, `Home`, `Mounts`), on the same fleet once its own hook blocks are in "
        "(the noop must change nothing), then with one `env` value changed (it must change "
        "something).",
        "",
        "⁵ **A mixed fleet.** bench/mixed.py: another fresh fleet of as many pods, half of "
        "them (rounded down) sandbox Vast instances, whose SSH sessions start inside tmux "
        "and whose pods file entries say `provider: vast`, the rest RunPod pods, behind the "
        "same latency proxy; converged by one apply (untimed), then its own floor and "
        "`podstate check`, which must find every pod and instance in state.",
        "",
        "- **Fleet.** Sandbox pods (podstate/sandbox/): a real sshd per pod in its own "
        "namespaces, shapes cycling through the five of docs/sandbox.md. The desired state is "
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
        "each followed by its same-work replay but the first apply's, which comes last; check "
        "and noop with a slow `nvidia-smi`; Ansible's check (`ansible-playbook --check "
        "bench/ansible/fleet.yml`, forks = pods, pipelining, ControlPersist, no fact "
        "gathering; its ControlPersist masters are closed before it, so it starts from fresh "
        "connections too); plain pyinfra's noop and reconfigure; the first apply's replay on "
        "restarted pods. Before Ansible's check, the two ~/.bashrc blocks Ansible's "
        "`blockinfile` adds next to podstate's own are written into each pod, so that Ansible "
        "too checks a fleet converged on its own terms; the run asserts its check would "
        "change nothing.",
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
