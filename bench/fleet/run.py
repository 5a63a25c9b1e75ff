"""Fleet benchmark: podstate against raw SSH, the same work with OpenSSH, plain pyinfra and
Ansible, over links with real round-trip time.

For every pod count and round-trip time (RTT), on fresh sandbox pods reached through the
latency proxy (bench/common/latency_proxy.py), one cycle (bench/fleet/cycle.py) times, in
this order:

* ``first``: ``pyinfra -y inventories/pods.py deploy/pod.py`` on the fresh pods;
* ``floor``: ``ssh -o BatchMode=yes pod true`` to every pod at once (OpenSSH, one process
  per pod, fresh connections, no ControlMaster): the least any tool can cost;
* ``check``: ``podstate check`` on the converged fleet;
* ``noop``: the same apply again, on the converged fleet;
* ``reconfigure``: the same apply once one ``env`` value has changed for every pod;
* ``same_*``: each of those four's remote commands, recorded as podstate sent them, sent
  again with plain OpenSSH from the state the step found (bench/fleet/rivals/replay.py): the
  same work, without podstate's process; a check afterwards must be clean;
* ``check_slow``, ``noop_slow``: check and noop with every ``nvidia-smi`` call taking
  ``--nvidia-smi-delay`` seconds, as on a multi-GPU host without persistence mode;
* ``ansible``: ``ansible-playbook --check bench/ansible/fleet.yml``, the same work written for
  Ansible, on the same fleet, once the two ~/.bashrc blocks that Ansible's ``blockinfile``
  adds beside podstate's hooks are in place (its check must then find nothing to change);
* ``plain_noop``, ``plain_reconfigure``: the same desired state as plain pyinfra
  (bench/plain_pyinfra), converged on its own terms, then with one ``env`` value changed;
* ``mixed_floor``, ``mixed_check``: on another fresh fleet of as many pods, half of them
  sandbox Vast instances, the floor and ``podstate check`` of the converged fleet
  (bench/fleet/mixed.py), in the first ``--mixed-runs`` runs.

Before the cycles, bench/fleet/podwork.py measures the CPU time and the programs that a check
and a reconfigure cost one pod. Each step's remote commands per pod are counted from the pods'
sshd logs. Cycles repeat ``--runs`` times, interleaved (run 1 of every setting, then run
2, ...), and the report gives medians. ``--report`` rebuilds the Markdown and the plot from
the raw JSON alone.

Needs root (sandbox pods), strace and the ``bench`` extra (ansible-core, matplotlib).

This module runs the cycles and the command line. A timed step is ``bench/common/steps.py``,
the sandbox pods behind the proxy ``bench/common/pods.py``; Ansible's step is
``bench/fleet/rivals/ansible.py``, plain pyinfra's ``bench/fleet/rivals/plain.py``; the report
is ``bench/fleet/report.py`` (numbers from ``bench/common/stats.py``, plot
``bench/common/plot.py``).
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common.cli import need_root, numbers, results_options
from bench.common.machine import machine
from bench.common.steps import BIN, ROOT, BenchError
from bench.fleet.cycle import cycle
from bench.fleet.mixed import mixed
from bench.fleet.podwork import pod_work
from bench.fleet.report import write_report
from bench.fleet.tables import STEPS
from podstate.jsonfile import write_json


@dataclass
class Settings:
    """What to measure: round-trip times, pod counts, repetitions."""

    rtts_ms: list[float] = field(default_factory=lambda: [150.0, 50.0, 0.0])
    pod_counts: list[int] = field(default_factory=lambda: [8, 24, 48])
    runs: int = 3
    nvidia_smi_delay: float = 1.0  # seconds each nvidia-smi call takes in the slow steps
    pod_work_runs: int = 5  # repetitions of each measure of the pods' own work (0: none)
    mixed_runs: int = 1  # runs that also time the mixed fleet (RunPod pods and Vast instances)


# --- the whole run --------------------------------------------------------------------------


def measure(settings: Settings, ansible_runs: int, out: Path) -> dict[str, Any]:
    """Run every cycle, saving the raw JSON after each; return the raw results.

    Cycles are interleaved (every setting once, then again) so that a slow spell of the
    machine spreads over all settings instead of spoiling one. Ansible runs in the first
    ``ansible_runs`` rounds, at non-zero RTTs only.
    """
    # As an installed wheel has it: pyinfra's CLI never writes bytecode, and an editable
    # install comes without, so podstate's modules would be compiled again at every start.
    for package in ("podstate", "roles"):
        compileall.compile_dir(ROOT / package, quiet=1)
    raw: dict[str, Any] = {
        "machine": machine(),
        "settings": asdict(settings) | {"ansible_runs": ansible_runs},
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "samples": [],
    }
    raw["startup"] = startup_times()
    raw["first_connection"] = first_connection_times()
    if settings.pod_work_runs:
        print("the pods' own work: CPU and programs on one pod", flush=True)
        raw["pod_work"] = pod_work(settings.pod_work_runs)
        write_json(out / "fleet.json", raw, indent=1)
    total = settings.runs * len(settings.rtts_ms) * len(settings.pod_counts)
    began = time.monotonic()
    for run in range(settings.runs):
        for rtt in settings.rtts_ms:
            for pods in settings.pod_counts:
                with_ansible = run < ansible_runs and rtt > 0
                done = len(raw["samples"])
                print(
                    f"[{done + 1}/{total}] run {run + 1}, {rtt:g} ms, {pods} pods"
                    + (", with Ansible" if with_ansible else ""),
                    flush=True,
                )
                sample = cycle(pods, rtt, run, with_ansible, settings.nvidia_smi_delay)
                if run < settings.mixed_runs:
                    sample["steps"].update(mixed(pods, rtt))
                raw["samples"].append(sample)
                print(
                    "    "
                    + ", ".join(
                        f"{step} {sample['steps'][step]['seconds']:.2f}s"
                        for step in STEPS
                        if step in sample["steps"]
                    ),
                    flush=True,
                )
                raw["elapsed_s"] = round(time.monotonic() - began, 1)
                write_json(out / "fleet.json", raw, indent=1)
    raw["finished"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    write_json(out / "fleet.json", raw, indent=1)
    return raw


def startup_times(runs: int = 3) -> dict[str, float]:
    """Return each tool's median start-up time: the command that loads it and contacts nothing.

    ``podstate --help`` imports what ``podstate check`` imports (pyinfra, paramiko, gevent,
    the desired-state schema); the floor's start-up is that of ``ssh -V``.
    """
    commands = {
        "podstate --help": [str(BIN / "podstate"), "--help"],
        "pyinfra --help": [str(BIN / "pyinfra"), "--help"],
        "ansible-playbook --version": [str(BIN / "ansible-playbook"), "--version"],
        "ssh -V": ["ssh", "-V"],
    }
    result = {}
    for name, command in commands.items():
        if not Path(command[0]).exists() and "/" in command[0]:
            continue
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(command, cwd=ROOT, capture_output=True, stdin=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        result[name] = round(statistics.median(times), 3)
    return result


def first_connection_times(runs: int = 5) -> dict[str, float]:
    """Return the median time from starting podstate's check, pyinfra's apply with podstate's
    inventory and deploy files, the same with an empty deploy file, and pyinfra alone (its
    own CLI running ``true``) to their first SSH connection attempt (bench/startup.py)."""
    from bench.startup import first_connections

    names = {
        "check": "podstate check",
        "pyinfra": "pyinfra apply",
        "empty": "pyinfra, empty deploy",
        "bare": "pyinfra alone",
    }
    return {names[n]: round(wall, 3) for n, (wall, _) in first_connections(runs).items()}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or only rebuild the report); return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rtt", type=lambda t: numbers(t, float), default=Settings().rtts_ms,
        help="round-trip times in ms, comma-separated; 0 measures local work alone "
        "(default 150,50,0)",
    )  # fmt: skip
    parser.add_argument(
        "--pods", type=lambda t: numbers(t, int), default=Settings().pod_counts,
        help="pod counts, comma-separated (default 8,24,48)",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=Settings().runs, help="runs (default 3)")
    parser.add_argument(
        "--ansible-runs", type=int, default=1,
        help="runs that include Ansible (default 1: it takes minutes at 48 pods)",
    )  # fmt: skip
    parser.add_argument(
        "--nvidia-smi-delay", type=float, default=Settings().nvidia_smi_delay, metavar="SECONDS",
        help="check and noop again with each nvidia-smi call taking this long, as on a "
        "multi-GPU host without persistence mode (default 1; 0: not)",
    )  # fmt: skip
    parser.add_argument(
        "--pod-work-runs", type=int, default=Settings().pod_work_runs,
        help="repetitions of each measure of the CPU and programs on one pod (default 5; 0: "
        "not measured)",
    )  # fmt: skip
    parser.add_argument(
        "--mixed-runs", type=int, default=Settings().mixed_runs,
        help="runs that also time a check of a mixed fleet, half of it Vast instances "
        "(default 1; 0: not)",
    )  # fmt: skip
    results_options(parser, "only rebuild fleet.md and fleet.png from fleet.json")
    args = parser.parse_args(argv)
    try:
        if args.report:
            raw = json.loads((args.out / "fleet.json").read_text())
        else:
            need_root()
            if args.pod_work_runs and not shutil.which("strace"):
                raise BenchError(
                    "strace missing (it counts programs on a pod): apt-get install strace"
                )
            if args.ansible_runs and not (BIN / "ansible-playbook").exists():
                raise BenchError("ansible-playbook missing: pip install -e '.[bench]'")
            if args.runs < 1 or any(n < 1 for n in args.pods) or any(r < 0 for r in args.rtt):
                raise BenchError("runs and pod counts must be positive, RTTs not negative")
            if not 0 <= args.nvidia_smi_delay <= 60 or args.pod_work_runs < 0:
                raise BenchError("the nvidia-smi delay is 0 to 60 s, pod work runs at least 0")
            if args.mixed_runs < 0:
                raise BenchError("mixed runs must be at least 0")
            settings = Settings(
                rtts_ms=args.rtt,
                pod_counts=sorted(args.pods),
                runs=args.runs,
                nvidia_smi_delay=args.nvidia_smi_delay,
                pod_work_runs=args.pod_work_runs,
                mixed_runs=args.mixed_runs,
            )
            raw = measure(settings, min(args.ansible_runs, args.runs), args.out)
        write_report(raw, args.out)
    except (BenchError, OSError, subprocess.SubprocessError) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'fleet.md'} and {args.out / 'fleet.png'}")
    return 0
