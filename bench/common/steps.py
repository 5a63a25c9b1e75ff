"""Timing one benchmark step: wall time, the client's CPU, and remote commands per pod.

Remote commands are counted from the sandbox pods' sshd logs (``inside.commands_served``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from podstate.sandbox import inside

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STEP_TIMEOUT_S = 600
# The apply as the README's first run does it (podstate's own deploy file alone)
APPLY = [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"]
CHECK = [str(BIN / "podstate"), "check"]


class BenchError(Exception):
    """A step failed or the machine cannot run the benchmark; the message says which."""


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    """Set environment variables for the block, then restore the old ones."""
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def tool_env(pods_file: Path, vars_path: Path) -> dict[str, str]:
    """Return the environment a measured command runs in: this one, with the pods file and the
    vars directory given, and without RUNPOD_API_KEY or VAST_API_KEY (the pods are the
    file's)."""
    return {
        **{k: v for k, v in os.environ.items() if k not in ("RUNPOD_API_KEY", "VAST_API_KEY")},
        "PODSTATE_PODS": str(pods_file),
        "PODSTATE_VARS": str(vars_path),
    }


def _per_pod(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    deltas = [after[name] - before.get(name, 0) for name in after]
    return {"min": min(deltas), "max": max(deltas), "mean": statistics.fmean(deltas)}


def _children_cpu() -> float:
    """Return the CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _machine_cpu() -> float:
    """Return the CPU seconds this machine's cores have spent working (all processes: the
    tool, the sandbox pods' sshd and commands, the latency proxy) since boot."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


class Meter:
    """A step's measure, from its start: wall time, the CPU of this process's children and
    of the whole machine, and the remote commands each pod served."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.before = inside.commands_served(state)
        self.cpu, self.machine_cpu = _children_cpu(), _machine_cpu()
        self.start = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        """Return the step so far: ``seconds``, ``client_cpu_s``, ``machine_cpu_s`` and
        ``commands`` (per pod: min, max, mean)."""
        seconds = time.perf_counter() - self.start
        return {
            "seconds": seconds,
            "client_cpu_s": _children_cpu() - self.cpu,
            "machine_cpu_s": _machine_cpu() - self.machine_cpu,
            "commands": _per_pod(self.before, inside.commands_served(self.state)),
        }


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def timed(
    name: str, command: list[str], env: dict[str, str], state: Path, expect: int = 0
) -> tuple[dict[str, Any], str]:
    """Run ``command`` from the repository root; return its time, commands per pod, and its
    output (stdout, then stderr).

    Raises BenchError when it exits with another status than ``expect``.
    """
    meter = Meter(state)
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
    )
    step = meter.stop()
    if result.returncode != expect:
        raise BenchError(
            f"{name}: exit {result.returncode}, expected {expect}:\n"
            f"{_tail(result.stdout + result.stderr, 20)}"
        )
    return step, result.stdout + result.stderr


def ssh_base(doc: dict[str, Any]) -> list[str]:
    """Return the OpenSSH command line, up to its options for one pod, that reaches the pods
    of the pods file ``doc`` as podstate does (its key, its known_hosts, no prompt)."""
    return [
        "ssh", "-F", "/dev/null", "-i", doc["defaults"]["ssh_key"],
        "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={doc['defaults']['ssh_known_hosts_file']}",
        "-o", "StrictHostKeyChecking=yes",
    ]  # fmt: skip


def floor(pods_file: Path, state: Path) -> dict[str, Any]:
    """Return the time for ``ssh pod true`` to every pod at once, one OpenSSH client each."""
    doc = yaml.safe_load(pods_file.read_text())
    base = ssh_base(doc) + ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
    commands = [
        base + ["-p", str(pod["ssh_port"]), f"root@{pod['ssh_hostname']}", "true"]
        for pod in doc["pods"].values()
    ]
    meter = Meter(state)
    processes = [
        subprocess.Popen(
            c, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for c in commands
    ]
    errors = [p.communicate(timeout=STEP_TIMEOUT_S)[1] for p in processes]
    step = meter.stop()
    failed = [(p, e) for p, e in zip(processes, errors, strict=True) if p.returncode != 0]
    if failed:
        raise BenchError(f"floor: {len(failed)} ssh failed: {failed[0][1].decode().strip()}")
    return step
