"""The pods' own work: CPU time and programs a check and a reconfigure cost one pod.

On sandbox pods without added latency, podstate runs against one pod alone (``--limit``);
the pod's CPU is its own cgroup's count (podstate.sandbox.cgroups: every process of the pod,
its sshd included, and no other), read before and after each measured command, and the
programs it started are counted with strace on the pod's sshd in runs apart
(``inside.programs_started``). Each figure is a median of ``runs``. Measured:

* ``ssh pod true``: a connection doing nothing, what every command costs before its work
  (sshd's key exchange, its re-exec and the login shell: the cgroup counts them all);
* a check of a converged pod whose container was probed before;
* an apply of one ``env`` value changed (a reconfigure): the probe, then the fold.

For one pod of each GPU shape (``PODS``) also a check right after its GPU cache
(podstate.paths.GPU_CACHE) was removed, the first probe of a container, and
``ssh pod 'timeout 20 nvidia-smi --query-gpu=...'``, the one query a probe makes; and on
``GRID_POD``, the three first measures with 1, 20 and 200 declared files (``FILES``) and
with 0 and 200 sleeping processes started in the pod over SSH (``PROCESSES``).

The probe is the check less ``ssh pod true``; the fold of a reconfigure is the reconfigure
less the check (both start with the same probe on one connection). The probe less its
``nvidia-smi`` (the check less the query alone) is what podstate's own program costs: the
sandbox's ``nvidia-smi`` is a shell script whose CPU grows with the GPUs, a real one NVML's.

``python -m bench.fleet.podwork [--runs 3]`` (root) measures it alone and writes
bench/results/podwork.md and podwork.json; ``make bench`` measures it before its cycles.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from bench.common.cli import RESULTS, need_root
from bench.common.machine import machine
from bench.common.pods import SANDBOX_DISK, vars_dir
from bench.common.steps import APPLY, BIN, ROOT, STEP_TIMEOUT_S, BenchError, environ, tool_env
from bench.fleet.cycle import reconfigure
from bench.fleet.podwork_figures import PODS
from bench.fleet.report import pod_work_page
from podstate.facts.gpu import GPU_FIELDS
from podstate.jsonfile import write_json
from podstate.paths import GPU_CACHE

GRID_POD = "pod-1"
FILES = (1, 20, 200)  # declared files (the desired state's files:, a line of content each)
PROCESSES = (0, 200)  # sleeping processes started in the pod beside them
SETTLE_S = 5.0  # the most to wait for a connection's processes in the pod to end


def cpu_meter(pod: str) -> Callable[[], float | None]:
    """Return a function that returns the CPU seconds (user + system) pod ``pod``'s processes
    have used since its start, read from its own cgroup; None where it cannot be read.

    It first waits (up to SETTLE_S) until the pod has no more processes than it had when the
    meter was made: a connection's sshd and shell count until they exit, after the client's
    own exit, and would otherwise fall into the next measure.
    """
    from podstate.sandbox import cgroups
    from podstate.sandbox.state import load_pods

    pod_dir = Path(load_pods()[pod]["dir"])
    procs = None
    for line in (pod_dir / cgroups.FILE).read_text().splitlines():
        controller, _, path = line.partition(" ")
        if controller == "cpuacct":
            procs = Path(path) / "cgroup.procs"

    def count() -> int:
        return len(procs.read_text().split()) if procs else 0

    baseline = count()

    def used() -> float | None:
        deadline = time.monotonic() + SETTLE_S
        while count() > baseline and time.monotonic() < deadline:
            time.sleep(0.01)
        cpu, _ = cgroups.usage(pod_dir)
        return None if cpu is None else cpu / 1e9

    return used


def _run(command: list[str], env: dict[str, str], expect: tuple[int, ...] = (0,)) -> str:
    """Run ``command`` from the repository; return its output, or raise BenchError unless it
    exited with a status of ``expect``."""
    result = subprocess.run(
        command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=STEP_TIMEOUT_S,
    )  # fmt: skip
    if result.returncode not in expect:
        raise BenchError(f"pod work: {' '.join(command[-3:])}: exit {result.returncode}\n"
                         f"{(result.stdout + result.stderr)[-2000:]}")  # fmt: skip
    return result.stdout


def _measure(pod: str, runs: int, run: Callable[[int], Any]) -> dict[str, Any]:
    """Return the median CPU seconds on ``pod`` of ``run(i)`` and the programs it started
    (the most of any run: a count that varies says the work does)."""
    from podstate.sandbox import inside

    cpu, programs, nvidia_smi = [], [], []
    names: Counter[str] = Counter()
    used = cpu_meter(pod)
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
        "cpu_all_s": cpu,
        "programs": max(programs),
        "programs_min": min(programs),
        "nvidia_smi": max(nvidia_smi),
        "by_program": dict(names.most_common()),  # of the last run traced
    }


def _basic(pod: str, runs: int, env: dict[str, str], vars_path: Path) -> dict[str, Any]:
    """Return ``ssh pod true``, a converged check and a reconfigure of ``pod``, measured."""
    from podstate.sandbox import ssh

    limit = ["--limit", pod]
    check = [str(BIN / "podstate"), "check", *limit]
    true = [*ssh.ssh_command(pod), "true"]

    def reconfigured(i: int) -> None:
        reconfigure(vars_path, f"work-{i}")
        _run([*APPLY[:2], *limit, *APPLY[2:]], env)

    _run(check, env)  # converged, and its container probed before
    return {
        "ssh true": _measure(pod, runs, lambda _: _run(true, env)),
        "check": _measure(pod, runs, lambda _: _run(check, env)),
        "reconfigure": _measure(pod, runs, reconfigured),
    }


@contextmanager
def _sleepers(pod: str, count: int, env: dict[str, str]) -> Iterator[None]:
    """Run the block with ``count`` sleeping processes started in ``pod`` over SSH (setsid,
    each a session of its own, as a user's detached job), ended by their PIDs after."""
    from podstate.sandbox import ssh

    if not count:
        yield
        return
    start = (
        f"for i in $(seq {count}); do setsid sleep 100000 </dev/null >/dev/null 2>&1 & "
        "echo $!; done"
    )
    pids = _run([*ssh.ssh_command(pod), start], env).split()
    if len(pids) != count:
        raise BenchError(f"pod work: started {len(pids)} sleeping processes of {count}")
    try:
        yield
    finally:
        _run([*ssh.ssh_command(pod), f"kill {' '.join(pids)}"], env, expect=(0, 1))


def grid(runs: int, env: dict[str, str], vars_path: Path) -> list[dict[str, Any]]:
    """Return GRID_POD's measures for each count of declared files and of processes."""
    host_vars = vars_path / "host_vars" / f"{GRID_POD}.yaml"
    limit = [*APPLY[:2], "--limit", GRID_POD, *APPLY[2:]]
    cells = []
    try:
        for files in FILES:
            declared = {
                f"/root/podwork/{i:03}.conf": {"content": f"value = {i}\n"} for i in range(files)
            }
            host_vars.write_text(yaml.safe_dump({"files": declared}))
            _run(limit, env)
            for processes in PROCESSES:
                print(f"  {GRID_POD}: {files} file(s), {processes} more processes", flush=True)
                with _sleepers(GRID_POD, processes, env):
                    measures = _basic(GRID_POD, runs, env, vars_path)
                cells.append({"files": files, "processes": processes, "measures": measures})
    finally:
        host_vars.unlink(missing_ok=True)
    return cells


def pod_work(runs: int = 5) -> dict[str, Any]:
    """Return, for each pod of PODS and each cell of the grid on GRID_POD, the CPU and
    programs of each measure (module docstring)."""
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
                check = [str(BIN / "podstate"), "check", "--limit", pod]

                def uncached(_: int, pod: str = pod, check: list[str] = check) -> None:
                    inside.pod_exec(pod, f"rm -f {GPU_CACHE}")
                    _run(check, env)

                query = [
                    *ssh.ssh_command(pod),
                    f"timeout 20 nvidia-smi --query-gpu={','.join(GPU_FIELDS)} "
                    "--format=csv,noheader,nounits",
                ]

                def queried(_: int, query: list[str] = query) -> None:
                    _run(query, env)

                _run(APPLY, env)  # the last pod's reconfigures changed every pod's state
                print(f"  {pod}: {PODS[pod]}", flush=True)
                measures = _basic(pod, runs, env, vars_path)
                measures["check, first probe"] = _measure(pod, runs, uncached)
                measures["nvidia-smi query"] = _measure(pod, runs, queried)
                result["pods"][pod] = measures
            result["grid"] = grid(runs, env, vars_path)
        finally:
            lifecycle.down()
            shutil.rmtree(work, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """Measure the pods' own work alone and write podwork.md and podwork.json (or only
    rebuild the page from the JSON); return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.fleet.podwork", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="runs of each measure, medians (default 3)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument(
        "--report", action="store_true", help="only rebuild podwork.md from podwork.json"
    )
    args = parser.parse_args(argv)
    raw_path = args.out / "podwork.json"
    try:
        if args.report:
            import json

            raw = json.loads(raw_path.read_text())
        else:
            need_root()
            if args.runs < 1:
                raise BenchError("runs must be at least 1")
            if not shutil.which("strace"):
                raise BenchError(
                    "strace missing (it counts programs on a pod): apt-get install strace"
                )
            started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            raw = {"machine": machine(), "started": started, **pod_work(args.runs)}
            write_json(raw_path, raw, indent=1)
        (args.out / "podwork.md").write_text(pod_work_page(raw))
    except (BenchError, OSError, subprocess.SubprocessError) as error:
        print(f"bench.fleet.podwork: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'podwork.md'} and {raw_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
