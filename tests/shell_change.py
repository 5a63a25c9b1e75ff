"""Helpers for the unit tests of the shell that changes pods (tests/test_shell_units_*.py):
run one function of a script under each POSIX shell a pod may have as /bin/sh, and build
the fixture trees (a pod's files, a /proc) it is pointed at instead of this machine's."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.shell_probe import SHELLS

SCRIPTS = Path(__file__).parent.parent / "podstate" / "scripts"
FIXTURES = Path(__file__).parent / "fixtures" / "shell"


@dataclass(frozen=True)
class Ran:
    """What a shell function did: its return code, stdout and stderr."""

    code: int
    out: str
    err: str


def run(shell: str, text: str, env: dict[str, str] | None = None, timeout: float = 20) -> Ran:
    """Return what ``text`` did run by ``shell`` (a key of SHELLS) under LC_ALL=C, with PATH
    and ``env`` as its only environment: the unit tests' one way of running shell."""
    base = {"PATH": os.environ["PATH"], "LC_ALL": "C", "HOME": os.environ.get("HOME", "/root")}
    done = subprocess.run(
        [*SHELLS[shell], "-c", text],
        env=base | (env or {}),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def proc_tree(root: Path, boot_id: str, stat: str, environ: dict[str, str]) -> Path:
    """Return ``root``, made a fixture /proc: the kernel's boot id, process 1's ``stat``
    line and its environment (NUL-separated, as the kernel gives it)."""
    (root / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text(boot_id + "\n")
    (root / "1").mkdir()
    (root / "1" / "stat").write_text(stat + "\n")
    entries = (f"{name}={value}\0".encode() for name, value in environ.items())
    (root / "1" / "environ").write_bytes(b"".join(entries))
    return root


def stat_line(comm: str, starttime: int) -> str:
    """Return a ``/proc/PID/stat`` line for a process named ``comm`` (which may hold spaces
    and parentheses, as the kernel allows) started ``starttime`` ticks after boot."""
    fields = ["S", "0", "1", "1", "0", "-1", "4194560"] + ["0"] * 12 + [str(starttime)]
    return f"1 ({comm}) " + " ".join(fields + ["12345", "678"])


def fake_command(bin_dir: Path, name: str, output: str) -> Path:
    """Return ``bin_dir``, holding a command ``name`` that prints ``output``: a stand-in
    for a program this machine lacks (nvidia-smi), put first on PATH."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\ncat <<'PODSTATE_FIXTURE'\n{output}PODSTATE_FIXTURE\n")
    path.chmod(0o755)
    return bin_dir


def sourced(shell: str, names: list[str], text: str, env: dict[str, str] | None = None) -> Ran:
    """Return what ``text`` did run by ``shell`` after the scripts ``names`` were sourced as a
    pod gets them (podstate.shell.script: comments left out), with ``env`` added: how a test
    calls one function of a file of functions."""
    from podstate.shell import script

    return run(shell, "".join(script(name) for name in names) + text, env)


def git(*args: str) -> str:
    """Return git's stdout for ``args`` (it must succeed), with a fixed author and no user
    configuration: how the tests make the checkouts a script reads or changes."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(["git", *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout
