"""The fleet report's tables: one per RTT, the pods' own work, where the time goes, and the
machine; with the steps they list, in order, and the ratios they show."""

from __future__ import annotations

from typing import Any

from bench.common.stats import Cell, fmt, ratio, slope
from bench.fleet.podwork_figures import PODS as PODWORK_PODS
from bench.fleet.podwork_figures import derived

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


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


def rtt_tables(table: dict, counts: list[int], rtts: list[float]) -> list[str]:
    """Return a table per RTT: each step's medians against pods, the growth from the fewest
    pods to the most, the slope, commands per pod; then the ratios and the slow nvidia-smi's
    extra time."""

    def cell(step: str, rtt: float, pods: int) -> Cell | None:
        return table.get((step, rtt, pods))

    lines: list[str] = []
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
                + " | ".join(fmt(c.median if c else None) for c in row)
                + f" | {fmt(ratio(row[-1], row[0]))}"
                + f" | {fmt(ms(slope(points)), 1)} | {commands} |"
            )
        for name, top, bottom in RATIOS:
            ratios = [ratio(cell(top, rtt, n), cell(bottom, rtt, n)) for n in counts]
            if any(r is not None for r in ratios):
                lines.append(f"| *{name}* | " + " | ".join(fmt(r) for r in ratios) + " | | | |")
        extra = [slow_extra(cell, rtt, n) for n in counts]
        if any(e is not None for e in extra):
            lines.append(
                "| *check, 1 s `nvidia-smi`, less check (s)* | "
                + " | ".join(fmt(e) for e in extra)
                + " | | | |"
            )
        lines.append("")
    return lines


def slow_extra(cell: Any, rtt: float, pods: int) -> float | None:
    """Return how much longer a check took with a slow nvidia-smi, in seconds."""
    slow, fast = cell("check_slow", rtt, pods), cell("check", rtt, pods)
    return slow.median - fast.median if slow and fast else None


def pod_work_table(found: dict[str, Any] | None) -> list[str]:
    """Return the section on the pods' own work: CPU and programs on one pod, for each GPU
    shape and for each cell of the grid of declared files and processes."""
    if not found:
        return []
    lines = [
        "## The pods' own work",
        "",
        f"On one sandbox pod, without added latency, podstate run against it alone (medians "
        f"of {found['runs']}; bench/fleet/podwork.py): the CPU time of the pod's own cgroup, "
        "read before and after each command (every process of the pod: the sshd's work for "
        "the connection, its key exchange included, and the login shell's too), and the "
        "programs started (strace on the sshd, in runs apart: its re-exec for the connection "
        "and the login shell included). The probe is a check less `ssh pod true`; the fold "
        "of a reconfigure is the reconfigure less the check.",
        "",
        "| pod | measure | CPU, ms | programs |",
        "|---|---|---|---|",
    ]
    for pod, measures in found["pods"].items():
        shape = PODWORK_PODS.get(pod, "")
        for name, m in [*measures.items(), *derived(measures).items()]:
            lines.append(f"| {pod} ({shape}) | {name} | {_ms(m.get('cpu_s'))} | {m['programs']} |")
    lines.append("")
    lines += pod_work_grid(found.get("grid"))
    for pod, measures in found["pods"].items():
        for name, m in derived(measures).items():
            if m.get("by_program"):
                shown = ", ".join(f"{program} {n}" for program, n in m["by_program"].items())
                lines.append(f"- {pod}, {name}: {shown}.")
    return lines + [
        "",
        "Of a fold's programs, the pod lock's are scripts/lock.sh's: a `flock` to take it "
        "(and one for each renewal, every 10 s at most), its `mkdir` and the `rm` that "
        "releases it; its clock starts none (the boot's time is kept beside the lock). Each "
        "file a fold writes costs its `mv`: the content rides in the payload as it is, and "
        "the writes prove themselves together, one `sha256sum` and one `stat` for all before "
        "each step that waits for them and at the end.",
        "",
    ]


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{1000 * seconds:.1f}"


def pod_work_grid(cells: list[dict[str, Any]] | None) -> list[str]:
    """Return the table of the grid: one pod's CPU in ms for each count of declared files
    and of other processes, and the programs of its check and of its fold."""
    if not cells:
        return []
    lines = [
        "With 1, 20 and 200 declared files (the desired state's `files:`, a line each) and "
        "with 0 and 200 sleeping processes started in the pod over SSH (`setsid sleep`), on "
        "one pod with 2 GPUs; CPU in ms of the pod's cgroup:",
        "",
        "| files | more processes | `ssh pod true` | check | probe | reconfigure | fold | "
        "programs: check, fold |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        m = cell["measures"]
        d = derived(m)
        lines.append(
            f"| {cell['files']} | {cell['processes']} | {_ms(m['ssh true']['cpu_s'])} | "
            f"{_ms(m['check']['cpu_s'])} | {_ms(d['probe']['cpu_s'])} | "
            f"{_ms(m['reconfigure']['cpu_s'])} | {_ms(d['fold of a reconfigure']['cpu_s'])} | "
            f"{m['check']['programs']}, {d['fold of a reconfigure']['programs']} |"
        )
    return [*lines, ""]


def breakdown(
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
                trips.append(fmt((c.median - b.median) / (rtt / 1000), 1) if c and b else "–")
        top = max(rtts)
        cpus = [table.get((step, top, n)) for n in counts]
        lines.append(
            f"| {LABELS[step]} | "
            + " | ".join(fmt(b.median if b else None) for b in base)
            + " | "
            + " | ".join(trips)
            + " | "
            + " | ".join(fmt(c.cpu if c else None) for c in cpus)
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


def machine_table(raw: dict[str, Any], knee: int) -> list[str]:
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
