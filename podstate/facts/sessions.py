"""The probe's interactive sessions: terminals open on the pod and running notebook kernels,
which make a pod in use whatever its GPUs read (podstate.facts.activity).

scripts/sessions.sh reads /proc with the shell's own ``read``: no program is started.
"""

from __future__ import annotations

from dataclasses import dataclass

from podstate.facts.decode import decode
from podstate.facts.section import Section
from podstate.shell import script

KINDS = ("tty", "kernel")


@dataclass(frozen=True)
class Session:
    """An interactive session of the pod."""

    pid: int
    kind: str  # "tty": a terminal, "kernel": a notebook kernel
    command: str  # its /proc/PID/comm


def probe_lines() -> list[str]:
    """Return the probe lines that list the pod's interactive sessions
    (``sess PID KIND COMM``), read-only."""
    return [script("sessions.sh"), "sessions"]


def parse(output: list[str]) -> tuple[Session, ...]:
    """Return the probe's ``sessions`` from its ``sess`` lines, a :class:`Session` each."""
    sessions = []
    for line in output:
        _, pid, kind, comm = line.split(" ")
        if kind not in KINDS:
            raise ValueError(f"unknown session kind {kind!r}")
        sessions.append(Session(int(pid), kind, decode(comm).strip()))
    return tuple(sessions)


SECTION = Section(
    "sessions",
    fields=("sessions",),
    parse=lambda answer: {"sessions": parse(answer.lines("sess"))},
    lines=lambda arguments: probe_lines(),
)
