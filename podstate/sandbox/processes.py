"""The processes of a sandbox: started in Linux namespaces, checked, and ended.

A process is recorded by its pid and its start time (``pid_start``), so that a pid the
kernel has since given to another process is never signalled. Every process writes its
errors to a log in the directory it belongs to; that is its mark (``marked``), by which
``stop`` finds it, not by records that may be gone or by namespace numbers Linux reuses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from podstate.sandbox.state import SandboxError

POD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Popen objects of processes this interpreter started, so it can reap them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def spawn(
    namespaces: list[str],
    command: list[str],
    cwd: Path,
    log_path: Path,
    pass_fds: tuple[int, ...] = (),
) -> dict[str, Any]:
    """Start ``command`` in new ``namespaces`` (unshare options; none: the host's) and a session
    of its own, in ``cwd``, logging to ``log_path``, with the file descriptors ``pass_fds``
    left open; return its pid record.

    ``cwd`` is the directory it belongs to (the pod's, the storage's or the state directory)
    and should hold ``log_path``: that log marks it and what it starts (``marked``).
    """
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


def init_of(pid: int) -> dict[str, int | None]:
    """Return the record (``init_pid``, ``init_pid_start``) of the process 1 of the pod whose
    bootstrap is ``pid`` (its child in a pid namespace of its own), by its pid outside it;
    raise SandboxError when it has none."""
    own = _namespace(pid, "pid")
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for child in children:
        if _namespace(child, "pid") not in (None, own):
            return {"init_pid": int(child), "init_pid_start": proc_start(int(child))}
    raise SandboxError(f"the pod's bootstrap (pid {pid}) runs no pid namespace of its own")


def host_pid(init_pid: int, inner: int) -> int | None:
    """Return the pid outside of the process that is ``inner`` in the pid namespace whose
    process 1 is ``init_pid``; None when none is (it ended)."""
    namespace = _namespace(init_pid, "pid")
    if namespace is None:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or _namespace(entry.name, "pid") != namespace:
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        nspid = next(
            (line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), []
        )
        if nspid and nspid[-1] == str(inner):
            return int(entry.name)
    return None


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


def marked(place: Path) -> list[tuple[int, int]]:
    """Return (pid, start time) of every live process the sandbox started for ``place`` or a
    directory under it (a pod's directory: that pod; the state directory: the whole sandbox).

    Each one's stderr is a log in its directory: ``spawn`` gives it one, what it starts
    inherits it, and a pod's sshd writes to its ``sshd.log`` (as its environment and
    command line, sshd's process title overwrites them). It still is after the state
    directory is deleted (the log is then a deleted file).
    """
    prefix = f"{place}/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            log = os.readlink(entry / "fd" / "2").removesuffix(" (deleted)")
        except OSError:
            continue
        if log.startswith(prefix):
            start = proc_start(int(entry.name))
            if start is not None:
                found.append((int(entry.name), start))
    return found


def _namespace(pid: int | str, kind: str = "mnt") -> tuple[int, int] | None:
    """Return the (device, inode) naming a process's namespace of ``kind`` (``mnt``,
    ``pid``); None if it is gone."""
    try:
        info = os.stat(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _hold_namespaces(processes: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Open the mount namespaces of the processes (the host's aside) and return each one's
    identity with its open file descriptor.

    An open namespace stays alive, so its inode number cannot pass to a new namespace while
    ``stop`` sweeps it: a process found in it later is one of the sandbox's. A process whose
    start time changed after the open was not the one asked for; its namespace is left out.
    """
    own = _namespace("self")
    held: dict[tuple[int, int], int] = {}
    for pid, start in processes:
        try:
            fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
        except OSError:
            continue
        info = os.fstat(fd)
        name = (info.st_dev, info.st_ino)
        if name == own or name in held or not alive(pid, start):
            os.close(fd)
        else:
            held[name] = fd
    return held


def _members(namespaces: dict[tuple[int, int], int]) -> list[int]:
    """Return the live processes inside any of the given mount namespaces."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if _namespace(entry.name) in namespaces and proc_start(int(entry.name)):
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


def _is_sshfs(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "sshfs"
    except OSError:
        return False


def stop(place: Path) -> None:
    """End the processes the sandbox started for ``place`` (``marked``: a pod's directory,
    or the state directory for everything) and whatever else runs in their mount namespaces.

    sshfs first, then the rest (a pod's sshd, the storage sshd, the API server), then what
    is left in their mount namespaces (the pods' logins and what they started). Found from
    the processes themselves, so it works without pods.json, or any state directory.
    """
    processes = marked(place)
    held = _hold_namespaces(processes)
    try:
        _end([(pid, start) for pid, start in processes if _is_sshfs(pid)])
        _end(list(processes))
        for _ in range(3):
            stragglers: list[tuple[int, int | None]] = [(pid, None) for pid in _members(held)]
            if not stragglers:
                break
            _signal(stragglers, signal.SIGKILL)
            _wait_gone(stragglers, 3.0)
    finally:
        for fd in held.values():
            os.close(fd)
    _reap()
