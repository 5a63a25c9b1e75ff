"""The fleet report's prose: the reading of the figures, measured part by part, and the notes
on how each step was taken."""

from __future__ import annotations

from typing import Any

from bench.common.stats import fmt, ratio


def reading(table: dict, counts: list[int], rtts: list[float], raw: dict[str, Any]) -> list[str]:
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
            f"{fmt(ratio(table.get(('check', r, few)), table.get(('floor', r, few))))} at {r:g} ms"
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


def notes(raw: dict[str, Any]) -> list[str]:
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
        "⁵ **A mixed fleet.** bench/fleet/mixed.py: another fresh fleet of as many pods, half of "
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
        "- **Latency.** bench/common/latency_proxy.py, one asyncio process for all pods, holds "
        "each chunk RTT/2 in each direction, in order, without a throughput cap, and opens the "
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
