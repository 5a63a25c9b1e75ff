"""The pods' own work: CPU time and programs a check and a reconfigure cost one pod.

On sandbox pods without added latency, for one pod of each GPU shape: its sshd is put in a
cgroup of its own (the CPU time of everything it starts, to the nanosecond) and traced with
strace (every program started: ``inside.programs_started``) while podstate runs against it
alone (``--limit``). Measured, each a median of ``runs``:

* ``ssh pod true``: a connection doing nothing, what every command costs before its work;
* a check of a converged pod whose container was probed before, and a check right after its
  GPU cache (podstate.paths.GPU_CACHE) was removed: the first probe of a container;
* an apply of one ``env`` value changed (a reconfigure): the probe, then the fold;
* ``ssh pod 'timeout 20 nvidia-smi --query-gpu=...'``: the one query a probe makes, alone.

The probe is the check less ``ssh pod true``; the fold of a reconfigure is the reconfigure
less the check (both start with the same probe on one connection). The probe less its
``nvidia-smi`` (the check less the query alone) is what podstate's own program costs: the
sandbox's ``nvidia-smi`` is a shell script whose CPU grows with the GPUs, a real one NVML's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common.pods import SANDBOX_DISK, vars_dir
from bench.common.steps import APPLY, BIN, ROOT, STEP_TIMEOUT_S, BenchError, environ, tool_env
from bench.fleet.cycle import reconfigure
from podstate.facts.gpu import GPU_FIELDS
from podstate.paths import GPU_CACHE

PODS = {"pod-1": "2 GPUs, PCIe (COMMUNITY)", "pod-2": "8 GPUs, NVLink (SECURE)"}


def _cgroup_root() -> tuple[Path, str] | None:
    """Return where this machine counts a cgroup's CPU time, and its file: cgroup v2's
    cpu.stat, or v1's cpuacct.usage; None if neither is writable here."""
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (root / "cgroup.procs").exists() and (root / "cpu.stat").exists():
            return root, "cpu.stat"
    v1 = Path("/sys/fs/cgroup/cpuacct")
    if (v1 / "cpuacct.usage").exists():
        return v1, "cpuacct.usage"
    return None


@contextlib.contextmanager
def cpu_meter(pid: int) -> Iterator[Any]:
    """Yield a function that returns the CPU seconds (user + system) that process ``pid`` and
    everything it starts from now on have used; it returns None where no cgroup can be made.

    The process is moved into a cgroup of its own for the block, and back after.
    """
    found = _cgroup_root()
    if found is None:
        yield lambda: None
        return
    root, name = found
    group = Path(tempfile.mkdtemp(prefix="podstate-bench-", dir=root))
    try:
        (group / "cgroup.procs").write_text(str(pid))

        def used() -> float:
            text = (group / name).read_text()
            if name == "cpu.stat":
                return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
            return int(text) / 1e9

        yield used
    finally:
        with contextlib.suppress(OSError):
            (root / "cgroup.procs").write_text(str(pid))
        for _ in range(50):  # a session still ending keeps the cgroup busy a moment
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def _run(command: list[str], env: dict[str, str], expect: tuple[int, ...] = (0,)) -> None:
    result = subprocess.run(
        command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=STEP_TIMEOUT_S,
    )  # fmt: skip
    if result.returncode not in expect:
        raise BenchError(f"pod work: {' '.join(command[-3:])}: exit {result.returncode}\n"
                         f"{(result.stdout + result.stderr)[-2000:]}")  # fmt: skip


def _measure(pod: str, runs: int, run: Any) -> dict[str, Any]:
    """Return the median CPU seconds on ``pod`` of ``run(i)`` and the programs it started
    (the most of any run: a count that varies says the work does)."""
    from podstate.sandbox import inside, lifecycle

    record = next(p for p in lifecycle.status() if p.name == pod)
    cpu, programs, nvidia_smi = [], [], []
    names: Counter[str] = Counter()
    with cpu_meter(record.sshd_pid) as used:
        for i in range(runs):
            before = used()
            run(i)
            after = used()
            if before is not None and after is not None:
                cpu.append(after - before)
    for i in range(min(runs, 2)):  # traced apart: strace costs the pod CPU of its own
        with inside.programs_started(pod) as started:
            run(runs + i)
        programs.append(len(started))
        nvidia_smi.append(sum(1 for p in started if p.endswith("/nvidia-smi")))
        names = Counter(p.rsplit("/", 1)[-1] for p in started)
    return {
        "cpu_s": statistics.median(cpu) if cpu else None,
        "programs": max(programs),
        "programs_min": min(programs),
        "nvidia_smi": max(nvidia_smi),
        "by_program": dict(names.most_common()),  # of the last run traced
    }


def pod_work(runs: int = 5) -> dict[str, Any]:
    """Return, for each pod of PODS, the CPU and programs of each measure (module docstring)."""
    from podstate.sandbox import inside, lifecycle, ssh

    work = Path(tempfile.mkdtemp(prefix="podstate-bench-work-"))
    state = work / "sandbox"
    result: dict[str, Any] = {"runs": runs, "pods": {}}
    with environ(PODSTATE_SANDBOX=str(state)):
        try:
            pods_file = lifecycle.up(5, disk=SANDBOX_DISK)
            vars_path = vars_dir(work, 5)
            env = tool_env(pods_file, vars_path)
            for pod in PODS:
                limit = ["--limit", pod]
                check = [str(BIN / "podstate"), "check", *limit]
                true = [*ssh.ssh_command(pod), "true"]

                def uncached(_: int, pod: str = pod, check: list[str] = check) -> None:
                    inside.pod_exec(pod, f"rm -f {GPU_CACHE}")
                    _run(check, env)

                def reconfigured(i: int, limit: list[str] = limit) -> None:
                    reconfigure(vars_path, f"work-{i}")
                    _run([*APPLY[:2], *limit, *APPLY[2:]], env)

                query = [
                    *ssh.ssh_command(pod),
                    f"timeout 20 nvidia-smi --query-gpu={','.join(GPU_FIELDS)} "
                    "--format=csv,noheader,nounits",
                ]
                _run(APPLY, env)  # the last pod's reconfigures changed every pod's state
                _run(check, env)
                result["pods"][pod] = {
                    "ssh true": _measure(pod, runs, lambda _, c=true: _run(c, env)),
                    "check": _measure(pod, runs, lambda _, c=check: _run(c, env)),
                    "check, first probe": _measure(pod, runs, uncached),
                    "reconfigure": _measure(pod, runs, reconfigured),
                    "nvidia-smi query": _measure(pod, runs, lambda _, c=query: _run(c, env)),
                }
        finally:
            lifecycle.down()
            shutil.rmtree(work, ignore_errors=True)
    return result


def derived(measured: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Return the probe (check less ``ssh true``), the first probe of a container and the
    fold of a reconfigure (reconfigure less check) from one pod's measures."""

    def less(a: str, b: str) -> dict[str, Any]:
        x, y = measured[a], measured[b]
        cpu = None if x["cpu_s"] is None or y["cpu_s"] is None else x["cpu_s"] - y["cpu_s"]
        names = Counter(x.get("by_program", {})) - Counter(y.get("by_program", {}))
        return {
            "cpu_s": cpu,
            "programs": x["programs"] - y["programs"],
            "by_program": dict(names.most_common()),
        }

    found = {
        "probe": less("check", "ssh true"),
        "probe, first of a container": less("check, first probe", "ssh true"),
        "fold of a reconfigure": less("reconfigure", "check"),
    }
    if "nvidia-smi query" in measured:  # results from before it was measured lack it
        found["probe less its nvidia-smi"] = less("check", "nvidia-smi query")
    return found


if __name__ == "__main__":  # a quick look: python -m bench.fleet.podwork
    import json

    if os.geteuid() != 0:
        raise SystemExit("bench.fleet.podwork: needs root (sandbox pods)")
    found = pod_work()
    for name, measures in found["pods"].items():
        found["pods"][name]["derived"] = derived(measures)
    print(json.dumps(found, indent=1))
