"""The scale benchmark's runs: one pod count's first apply, no-op applies, checks and
checks split into shards run at once, each with its wall time, the control processes' peak
memory and CPU, the pods' CPU (their cgroups) and the whole machine's."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.common.steps import BIN, ROOT
from podstate.sandbox import cgroups, lifecycle
from podstate.sandbox.state import state_dir

Sample = dict[str, float]


def _machine_busy_s() -> float:
    """Return the CPU seconds every core of the machine has spent busy since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _pods_cpu_s() -> float:
    """Return the CPU seconds of every sandbox pod's cgroup (its sshd and its processes)."""
    total = 0
    for pod_dir in (state_dir() / "pods").iterdir():
        cpu, _ = cgroups.usage(pod_dir)
        total += cpu or 0
    return total / 1e9


def measure(commands: list[list[str]], env: dict[str, str]) -> Sample:
    """Run ``commands`` at once; return the worst exit code, the wall seconds until the last
    ended, the sum of their peak RSS (MiB) and CPU seconds (wait4), and the CPU seconds the
    pods and the whole machine spent meanwhile.

    Each one's stderr goes to a temporary file, not a pipe: at 500 pods pyinfra writes more
    log lines than a pipe holds, and a pipe read only after ``wait4`` would block it forever.
    """
    pods_before, machine_before = _pods_cpu_s(), _machine_busy_s()
    started = time.monotonic()
    logs, procs = [], []
    for command in commands:
        log = tempfile.TemporaryFile()
        logs.append(log)
        procs.append(
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        )
    sample = {"exit": 0, "peak_mib": 0.0, "client_cpu_s": 0.0}
    for command, proc, log in zip(commands, procs, logs, strict=True):
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        sample["exit"] = max(sample["exit"], code)
        sample["peak_mib"] += usage.ru_maxrss / 1024
        sample["client_cpu_s"] += usage.ru_utime + usage.ru_stime
        log.seek(0)
        if code != 0:
            tail = "\n".join(log.read().decode(errors="replace").splitlines()[-5:])
            print(f"  {' '.join(command[:2])} exited {code}:\n{tail}", file=sys.stderr)
        log.close()
    sample["seconds"] = time.monotonic() - started
    sample["pods_cpu_s"] = _pods_cpu_s() - pods_before
    sample["machine_cpu_s"] = _machine_busy_s() - machine_before
    return sample


def median(samples: list[Sample]) -> Sample:
    """Return each figure's median over ``samples`` (the worst exit code), with the runs."""
    out = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    out["exit"] = max(s["exit"] for s in samples)
    out["runs"] = len(samples)
    return out


def run_count(
    pods: int,
    work: Path,
    shards: tuple[int, ...] = (),
    runs: int = 3,
    base_port: int | None = None,
) -> dict[str, Sample]:
    """Bring up ``pods`` sandbox pods; measure a first apply, then, ``runs`` times in turns,
    a no-op apply, a check and the check as each of ``shards`` shards run at once; take
    the pods down. Returns each run's medians."""
    os.environ["PODSTATE_SANDBOX"] = str(work / f"sandbox-{pods}")
    vars_dir = work / f"vars-{pods}"
    (vars_dir / "host_vars").mkdir(parents=True)
    (vars_dir / "group_vars").mkdir()
    (vars_dir / "group_vars" / "all.yaml").write_text(
        (ROOT / "inventories/group_vars/all.yaml").read_text()
    )
    # the one 64 MiB /dev/shm pod would be a violation: accept it, so every pod must succeed
    (vars_dir / "host_vars" / "pod-3.yaml").write_text(yaml.safe_dump({"shm": {"min_size": "32M"}}))
    try:
        pods_file = lifecycle.up(pods=pods, base_port=base_port)
        env = {**os.environ, "PODSTATE_PODS": str(pods_file), "PODSTATE_VARS": str(vars_dir)}
        apply = [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"]
        check = [str(BIN / "podstate"), "check", "--deploy", "deploy/pod.py"]
        measured = {"first apply": [measure([apply], env)]}
        for _ in range(runs):
            measured.setdefault("noop apply", []).append(measure([apply], env))
            measured.setdefault("check", []).append(measure([check], env))
            for n in shards:
                split = [[*check, "--shard", f"{k}/{n}"] for k in range(1, n + 1)]
                measured.setdefault(f"check as {n} shards", []).append(measure(split, env))
        return {run: median(samples) for run, samples in measured.items()}
    finally:
        lifecycle.down()
