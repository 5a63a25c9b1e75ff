"""Reaching into a running sandbox pod from the host, beneath SSH: run a command in it
(``pod_exec``), spoil its GPUs, and count what it serves and starts."""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from podstate.sandbox.processes import POD_PATH, alive
from podstate.sandbox.shapes import (
    GPU_LAYOUT,
    NVIDIA_SMI_CALLS,
    compute_app_command,
    gpu_busy_command,
    gpu_fault_command,
)
from podstate.sandbox.state import SandboxError, load_pods, state_dir

# What a pod's sshd logs for every exec request (a remote command).
SESSION = "Starting session: command for "
_POD_ENV = {
    "PATH": POD_PATH,
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
}


def pod_exec(
    name: str, command: str, check: bool = True, timeout: float | None = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``bash -c command`` inside a pod (its namespaces and root), bypassing SSH.

    stdout and stderr come back as text. With check, a non-zero exit raises
    subprocess.CalledProcessError (which carries the output), like subprocess.run.
    """
    pod = load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    if not alive(pod["pid"], pod.get("pid_start")):
        raise SandboxError(f"sandbox pod {name} is not running")
    return subprocess.run(
        [
            "nsenter",
            "-t",
            str(pod["init_pid"]),
            "-m",
            "-u",
            "-p",
            "-r",
            "-w",
            "--",
            "bash",
            "-c",
            command,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=check,
        env=_POD_ENV,
        cwd="/",
        timeout=timeout,
    )


def gpu_fault(name: str, fault: str, index: int = 0) -> None:
    """Make running pod ``name`` a bad GPU host: ``fault`` is a name of GPU_FAULTS (thermal,
    ecc, pcie, old-driver, nvml-mismatch, nvml-unknown, unknown-field) or ``no-gpus``;
    ``index`` the GPU it spoils."""
    pod_exec(name, gpu_fault_command(fault, index))


def gpu_busy(name: str, index: int = 0, percent: int = 87, memory_mib: int = 0) -> None:
    """Make GPU ``index`` of running pod ``name`` read ``percent`` % utilization with
    ``memory_mib`` MiB in use, to nvidia-smi and to the sandbox API's ``runtime.gpus``."""
    pod_exec(name, gpu_busy_command(index, percent, memory_mib))


def compute_process(
    name: str, index: int = 0, pid: int = 4242, command: str = "python3", memory_mib: int = 2048
) -> None:
    """Give GPU ``index`` of running pod ``name`` a compute process (``pid``, ``command``)
    holding ``memory_mib`` MiB, as nvidia-smi lists one."""
    pod_exec(name, compute_app_command(index, pid, command, memory_mib))


def gpus_idle(name: str) -> None:
    """Make every GPU of running pod ``name`` idle again: 0 %, no memory, no process."""
    pod_exec(name, f"sed -i '/^util|/d; /^app|/d' {GPU_LAYOUT}")


def nvidia_smi_calls(name: str) -> list[str]:
    """Return the arguments of every call of pod ``name``'s nvidia-smi since its container
    started, one string each, in order (a restart starts the list again)."""
    result = pod_exec(name, f"cat {NVIDIA_SMI_CALLS} 2>/dev/null || true")
    return result.stdout.splitlines()


@contextlib.contextmanager
def programs_started(name: str) -> Iterator[list[str]]:
    """Yield a list that, once the block has run, holds every program the processes of pod
    ``name``'s sshd started during it (the path each successful execve ran), in start order.

    For counting what a command run over SSH costs the pod: the connection's own sshd
    (OpenSSH re-executes itself for each connection), the login shell for each remote
    command, and all they start (``execs``)."""
    with execs(name) as started:
        paths: list[str] = []
        yield paths
    paths += [re.match(r'execve\("([^"]*)"', line)[1] for line in started]  # type: ignore[index]


@contextlib.contextmanager
def execs(*names: str) -> Iterator[list[str]]:
    """Yield a list that, once the block has run, holds strace's line for each successful
    execve of the processes of the pods ``names``' sshds during it, in start order: the
    program's path and its arguments whole, as strace writes them (C escapes), so what a
    command line held can be read back exactly.

    Needs strace (apt-get install strace), which is attached to the sshds before the block
    runs and detached after. Its messages go to a file, never to a pipe: it writes one for
    each process it follows, and a pipe nobody reads fills up, where strace, and every
    process it traces, would stop."""
    pids = []
    for name in names:
        pod = load_pods().get(name)
        if pod is None:
            raise SandboxError(f"no sandbox pod named {name!r}")
        pids += ["-p", str(pod["sshd_pid"])]
    if not shutil.which("strace"):
        raise SandboxError("strace is missing; install it (apt-get install strace)")
    with tempfile.TemporaryDirectory(prefix="podstate-trace-") as tmp:
        log = Path(tmp, "messages")
        with log.open("w") as messages:
            tracer = subprocess.Popen(
                ["strace", "-f", "-ff", "-ttt", "-e", "trace=execve", "-e", "signal=none",
                 "-s", "1000000", "-o", f"{tmp}/t", *pids],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=messages,
            )  # fmt: skip
        started: list[str] = []
        try:
            _attached(tracer, log, len(names))
            yield started
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=30)
        found = []
        for trace in Path(tmp).glob("t.*"):
            found += re.findall(r"^(\d+\.\d+) (execve\(.*= 0)$", trace.read_text(), re.M)
        started += [line for _, line in sorted(found, key=lambda e: float(e[0]))]


def _attached(tracer: subprocess.Popen[bytes], log: Path, count: int) -> None:
    """Return once strace says in ``log`` that it follows each of the ``count`` processes it
    was given; raise SandboxError if it ends first (it could not attach)."""
    while log.read_text().count(" attached") < count:
        if tracer.poll() is not None:
            raise SandboxError(f"strace could not attach to the sshd: {log.read_text().strip()}")
        time.sleep(0.01)


def commands_served(root: Path | None = None) -> dict[str, int]:
    """Return, per pod, the exec requests (remote commands) its sshd has served so far.

    Counted from each pod's sshd log (LogLevel VERBOSE writes one "Starting session:
    command for" line per exec request). The log is in the state directory, not in the
    pod, and every start of the pod appends to it, so the count goes on across restarts
    (it never starts from zero again): take the difference of two readings. ``root`` is
    the state directory (default: ``state_dir()``).
    """
    root = root or state_dir()
    return {
        log.parent.name: log.read_text(errors="replace").count(SESSION)
        for log in sorted((root / "pods").glob("*/sshd.log"))
    }
