"""Fixtures for the unit tests of the probe's shell functions (scripts/work.sh and the
scripts that run beside it): the three shells a pod may have as /bin/sh, a way to run a
script's functions in one of them, and trees of files shaped like /proc.

A test sources the scripts it needs (as the probe does: podstate.shell.script, comments
left out), points ``proc_root`` at a fixture tree, and calls a function; nothing runs on a
pod, and nothing reads the machine's own /proc unless a test says so.
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from podstate.shell import script

# The shells a pod may have as /bin/sh, each as the command that runs one (``-c TEXT`` after).
SHELLS = {"dash": ["dash"], "bash": ["bash"], "busybox": ["busybox", "sh"]}


def run(
    shell: str, scripts: list[str], program: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Return what ``program`` did (its status, stdout and stderr) when run by ``shell`` (a
    key of SHELLS) after ``scripts`` (names in podstate/scripts/), with ``args`` as its
    positional parameters; it exists so that each test states only its call."""
    text = "\n".join([*(script(name) for name in scripts), program])
    return subprocess.run(
        [*SHELLS[shell], "-c", text, "sh", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
    )


@dataclass
class Process:
    """One process of a fixture /proc: the fields of its stat line a probe reads."""

    pid: int
    comm: str = "sleep"
    state: str = "S"
    ppid: int = 1
    session: int = 1
    tty: int = 0
    flags: int = 0
    utime: int = 0
    stime: int = 0
    cutime: int = 0
    cstime: int = 0
    start: int = 100

    def stat(self) -> str:
        """Return the process's /proc/PID/stat line, as the kernel writes it (52 fields)."""
        fields = [self.state, self.ppid, self.session, self.session, self.tty, -1, self.flags]
        fields += [0, 0, 0, 0, self.utime, self.stime, self.cutime, self.cstime, 20, 0, 1, 0]
        fields += [self.start] + [0] * 32
        return f"{self.pid} ({self.comm}) {' '.join(map(str, fields))}\n"


class ProcTree:
    """A directory shaped like /proc (``root``): the uptime, the boot id, processes with
    their stat, io, cmdline, comm and open sockets, and the TCP tables."""

    def __init__(self, root: Path, uptime: str = "1000.00", boot_id: str = "b00t") -> None:
        self.root = root
        self._sockets: list[socket.socket] = []
        (root / "sys" / "kernel" / "random").mkdir(parents=True)
        (root / "net").mkdir()
        (root / "uptime").write_text(f"{uptime} 1.00\n")
        (root / "sys" / "kernel" / "random" / "boot_id").write_text(f"{boot_id}\n")

    def add(
        self,
        process: Process,
        io: tuple[int, int] | None = (0, 0),
        cmdline: str = "",
    ) -> Path:
        """Return the directory of ``process``, written: its stat, its comm, its io (rchar
        and wchar; None: unreadable, as another user's is) and its command line."""
        where = self.root / str(process.pid)
        (where / "fd").mkdir(parents=True)
        (where / "fdinfo").mkdir()
        (where / "stat").write_text(process.stat())
        (where / "comm").write_text(process.comm + "\n")
        (where / "cmdline").write_text(cmdline.replace(" ", "\0"))
        (where / "io").write_text("" if io is None else f"rchar: {io[0]}\nwchar: {io[1]}\n")
        return where

    def socket(self, pid: int, fd: int, inode: int) -> None:
        """Give process ``pid`` an open socket ``fd`` whose inode is ``inode``: a socket
        file where /proc has its link, and the fdinfo line that names the inode."""
        where = self.root / str(pid)
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(str(where / "fd" / str(fd)))
        self._sockets.append(unix)
        (where / "fdinfo" / str(fd)).write_text(f"pos:\t0\nflags:\t02\nino:\t{inode}\n")

    def tcp(self, *connections: tuple[str, int], table: str = "tcp") -> None:
        """Write the TCP table ``table``: one line per (state, inode), "01" established."""
        lines = [
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
            "   uid  timeout inode"
        ]
        for n, (state, inode) in enumerate(connections):
            lines.append(
                f"   {n}: 0100007F:0016 0100007F:D2A4 {state} 00000000:00000000 00:00000000 "
                f"00000000     0        0 {inode} 1 0000000000000000 20 4 30 10 -1"
            )
        (self.root / "net" / table).write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        """Close the sockets the tree holds open."""
        for unix in self._sockets:
            unix.close()
