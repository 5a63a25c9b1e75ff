"""The probe's processes: those whose environment sets a variable the profile declares.

A process started before an apply keeps the values it started with; the environment role
names each one that has a declared variable at another value (scripts/processes.sh reads
only the variables asked for).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from podstate.facts.decode import decode
from podstate.shell import script


def probe_lines(environ: list[str]) -> list[str]:
    """Return the probe lines that list the processes setting any of ``environ``
    (``proc PID COMMAND ENVIRON``), read-only."""
    if not environ:
        return []
    names = "|".join(re.escape(name) for name in environ)
    return [script("processes.sh"), f"processes {shlex.quote(names)}"]


def parse(output: list[str]) -> list[dict[str, Any]]:
    """Return the probe's ``processes`` from its ``proc`` lines: each one's ``pid``,
    ``command`` and the asked variables of its ``environ``."""
    processes = []
    for line in output:
        pid, comm, environ_b64 = line.partition(" ")[2].split(" ")
        processes.append(
            {
                "pid": int(pid),
                "command": decode(comm).strip(),
                "environ": dict(
                    item.split("=", 1) for item in decode(environ_b64).splitlines() if "=" in item
                ),
            }
        )
    return processes
