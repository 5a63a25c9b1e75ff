"""The probe's CPU on a container's own process table: how it grows with the processes.

The probe reads a container's processes one by one, so its CPU grows with how many the
container's PID namespace holds (a sandbox pod's is its own too: bench/fleet/podwork.py
measures a whole check there, from the pod's cgroup, beside 0 and 200 more processes). Here
the probe's program alone, without SSH, is run by ``sh`` as a pod runs it (its reader, the
program on stdin) in a new PID namespace (``unshare -p``) beside N sleeping processes, and
its CPU time (its ``sh`` and every program it starts, as the kernel counts a waited-for
child's) is measured, the median of ``runs``. Without GPUs or records: the probe of a
CPU-only container declaring a few paths and files.

``python -m bench.fleet.probe_cpu`` (root) prints the table and writes
bench/results/probe-cpu.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.common.machine import machine

COUNTS = (0, 10, 30, 100, 200)
RUNS = 7
OUT = Path(__file__).resolve().parents[1] / "results" / "probe-cpu.md"

# Run inside the namespace: N sleepers, then the probe RUNS times; prints each run's CPU ms.
INSIDE = """
import os, resource, subprocess, sys
n, runs, reader, text = int(sys.argv[1]), int(sys.argv[2]), os.environ["READER"], sys.stdin.read()
sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(n)]
try:
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(["sh", "-c", reader], input=text, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0 or done.stdout.splitlines()[-1:] != ["end"]:
            sys.exit("the probe failed: " + done.stderr[-500:])
        used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        print(round(used * 1000, 2), len(os.listdir("/proc")))
finally:
    for sleeper in sleepers:
        sleeper.kill()
"""


def measure(count: int, runs: int = RUNS) -> tuple[float, float, float]:
    """Return the probe's CPU milliseconds (median, lowest, highest of ``runs``) beside
    ``count`` other processes in a PID namespace of its own."""
    from podstate.facts import probe

    program = probe.payload({"paths": ["/root", "/tmp"], "files": ["/etc/hostname"]})
    namespace = ["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c", INSIDE]
    done = subprocess.run(
        [*namespace, str(count), str(runs)],
        input="".join(f"{line}\n" for line in program),
        env={**os.environ, "READER": probe.READER},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench.fleet.probe_cpu: {done.stderr.strip()[-500:]}")
    cpu = [float(line.split()[0]) for line in done.stdout.splitlines()]
    return statistics.median(cpu), min(cpu), max(cpu)


def report(rows: list[tuple[int, tuple[float, float, float]]]) -> str:
    """Return the Markdown page for ``rows`` (other processes, CPU ms)."""
    info = machine()
    lines = [
        "# The probe's CPU on a container's own process table",
        "",
        "The probe's program run by `sh` in a PID namespace of its own beside N sleeping",
        "processes, as a pod's container sees its own:",
        "its CPU time, its programs' included, medians of "
        f"{RUNS} (`python -m bench.fleet.probe_cpu`). A CPU-only container, no records.",
        "",
        "| other processes | CPU, ms (median) | lowest | highest |",
        "|---|---|---|---|",
        *(f"| {n} | {m:.1f} | {lo:.1f} | {hi:.1f} |" for n, (m, lo, hi) in rows),
        "",
        f"Machine: {info.get('cpu', '?')}; Python {info.get('python', '?')}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if os.geteuid() != 0:
        raise SystemExit("bench.fleet.probe_cpu: needs root (a PID namespace of its own)")
    found = [(count, measure(count)) for count in COUNTS]
    OUT.write_text(report(found))
    print(OUT.read_text())
