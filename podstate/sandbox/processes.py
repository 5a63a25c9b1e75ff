"""The processes of a sandbox: started in Linux namespaces, checked, and ended.

A process is recorded by its pid and its start time (``pid_start``), so that a pid the
kernel has since given to another process is never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

POD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Popen objects of processes this interpreter started, so it can reap them.
_CHILDREN: dict[int, subprocess.Popen] = {}


def spawn(
    namespaces: list[str],
    command: list[str],
    cwd: Path,
    log_path: Path,
    pass_fds: tuple[int, ...] = (),
) -> dict[str, Any]:
    """Start ``command`` in new ``namespaces`` (unshare options; none: the host's) and a session
    of its own, logging to ``log_path``, with the file descriptors ``pass_fds`` left open;
    return its pid record."""
    if namespaces:
        command = ["unshare", *namespaces, "--propagation", "private", "--", *command]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={"PATH": POD_PATH},
            start_new_session=True,
            pass_fds=pass_fds,
        )
    _CHILDREN[proc.pid] = proc
    return {"pid": proc.pid, "pid_start": proc_start(proc.pid)}


def proc_start(pid: int | None) -> int | None:
    """Return a live process's start time (clock ticks after boot); None if gone or zombie."""
    if not pid:
        return None
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid: int | None, start: int | None) -> bool:
    """True when pid runs and is the process recorded (same start time, if recorded)."""
    now = proc_start(pid)
    return now is not None and (start is None or now == start)


def namespaces_of(pid: int) -> tuple[str | None, str | None]:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt"), os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return None, None


def _members(namespaces: set[tuple[str, str]]) -> list[int]:
    """Return the live processes inside any of the given (mount, UTS) namespace pairs."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if namespaces_of(int(entry.name)) in namespaces and proc_start(int(entry.name)):
            found.append(int(entry.name))
    return found


def _signal(processes: Iterable[tuple[int, int | None]], sig: int) -> None:
    for pid, start in processes:
        if alive(pid, start):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def _wait_gone(processes: list[tuple[int, int | None]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        _reap()
        if not any(alive(pid, start) for pid, start in processes):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _end(processes: list[tuple[int, int | None]], timeout: float = 3.0) -> None:
    """SIGTERM the processes, then SIGKILL the ones still there after timeout."""
    _signal(processes, signal.SIGTERM)
    if not _wait_gone(processes, timeout):
        _signal(processes, signal.SIGKILL)
        _wait_gone(processes, timeout)


def _reap() -> None:
    for pid, proc in list(_CHILDREN.items()):  # pods may be restarted from several threads
        if proc.poll() is not None:
            _CHILDREN.pop(pid, None)


def stop(pods: Iterable[dict[str, Any]], others: list[dict[str, Any]]) -> None:
    """End pods (sshfs, then sshd, then whatever else is in their namespaces), then others."""
    pods = list(pods)
    sshfs = [(p["sshfs_pid"], p.get("sshfs_pid_start")) for p in pods if p.get("sshfs_pid")]
    for pod in pods:  # pods stopped half-way through starting
        if not pod.get("sshfs_pid") and pod.get("dir"):
            pid = _sshfs_pid_file(Path(pod["dir"]))
            if pid:
                sshfs.append((pid, None))
    _end(sshfs)
    sshd = [(p["pid"], p.get("pid_start")) for p in pods if p.get("pid")]
    namespaces = {(p["mnt_ns"], p["uts_ns"]) for p in pods if p.get("mnt_ns")}
    for pid, start in sshd:
        if alive(pid, start) and None not in namespaces_of(pid):
            namespaces.add(namespaces_of(pid))  # type: ignore[arg-type]
    _end(sshd)
    for _ in range(3):
        stragglers = [(pid, None) for pid in _members(namespaces)]
        if not stragglers:
            break
        _signal(stragglers, signal.SIGKILL)
        _wait_gone(stragglers, 3.0)
    _end([(o["pid"], o.get("pid_start")) for o in others if o.get("pid")])
    _reap()


def _sshfs_pid_file(pod_dir: Path) -> int | None:
    """Return the pid in a pod's sshfs.pid if it is an sshfs in another mount namespace."""
    try:
        pid = int((pod_dir / "sshfs.pid").read_text())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None
    if comm == "sshfs" and namespaces_of(pid)[0] != namespaces_of(os.getpid())[0]:
        return pid
    return None
