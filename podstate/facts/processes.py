"""The probe's processes: those whose environment sets a variable the profile declares.

A process started before an apply keeps the values it started with; the environment role
names each one that has a declared variable at another value (scripts/processes.sh reads
only the variables asked for, and SSH_CONNECTION, which sshd gives every session and so
every process started from one: a process without it was started with the container).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from podstate.facts.decode import decode
from podstate.facts.section import Argument, Section
from podstate.shell import script

SSH = "SSH_CONNECTION"


@dataclass(frozen=True)
class Process:
    """A process of the pod whose environment sets a variable the probe asked for."""

    pid: int
    command: str  # its /proc/PID/comm
    environ: dict[str, str]  # the asked variables it sets, with their values
    ssh: bool  # started from an SSH session (it has SSH_CONNECTION, not kept in environ)


def probe_lines(environ: list[str], inert: Sequence[str] = ()) -> list[str]:
    """Return the probe lines that list the processes setting any of ``environ``
    (``proc PID COMMAND ENVIRON``), but for those named in ``inert``, read-only."""
    if not environ:
        return []
    names = "|".join(re.escape(name) for name in [*environ, SSH])
    return [
        script("processes.sh"),
        f"processes {shlex.quote(names)} {shlex.quote(' '.join(inert))}",
    ]


def parse(output: list[str]) -> tuple[Process, ...]:
    """Return the probe's ``processes`` from its ``proc`` lines, a :class:`Process` each. A
    process that sets none of the asked variables is left out."""
    processes = []
    for line in output:
        pid, comm, environ_b64 = line.partition(" ")[2].split(" ")
        environ = dict(
            item.split("=", 1) for item in decode(environ_b64).splitlines() if "=" in item
        )
        ssh = environ.pop(SSH, None) is not None
        if environ:
            processes.append(Process(int(pid), decode(comm).strip(), environ, ssh))
    return tuple(processes)


SECTION = Section(
    "processes",
    fields=("processes",),
    parse=lambda answer: {"processes": parse(answer.lines("proc"))},
    lines=lambda arguments: probe_lines(arguments["environ"] or [], arguments["inert"] or []),
    arguments=(Argument("environ", sent=list), Argument("inert", sent=list)),
)
