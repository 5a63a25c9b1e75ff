"""The probe's interactive sessions: terminals open on the pod and running notebook kernels,
which make a pod in use whatever its GPUs read (podstate.facts.activity).

scripts/sessions.sh reads /proc with the shell's own ``read``: no program is started.
"""

from __future__ import annotations

from typing import Any

from podstate.facts.decode import decode
from podstate.shell import script

KINDS = ("tty", "kernel")


def probe_lines() -> list[str]:
    """Return the probe lines that list the pod's interactive sessions
    (``sess PID KIND COMM``), read-only."""
    return [script("sessions.sh"), "sessions"]


def parse(output: list[str]) -> list[dict[str, Any]]:
    """Return the probe's ``sessions`` from its ``sess`` lines: each one's ``pid``, ``kind``
    (``tty``: a terminal, ``kernel``: a notebook kernel) and ``command`` (/proc/PID/comm)."""
    sessions = []
    for line in output:
        _, pid, kind, comm = line.split(" ")
        if kind not in KINDS:
            raise ValueError(f"unknown session kind {kind!r}")
        sessions.append({"pid": int(pid), "kind": kind, "command": decode(comm).strip()})
    return sessions
