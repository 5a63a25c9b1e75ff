"""The probe's apt section: whether apt-get is there, and what dpkg knows of the packages."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from podstate.facts.decode import by_key, decode
from podstate.facts.section import Argument, Section

# What dpkg-query prints per package: its name and status (``ii``: installed).
DPKG_FORMAT = "${Package} ${db:Status-Abbrev}\\n"


@dataclass(frozen=True)
class Apt:
    """What the probe read of Debian's packaging on the pod."""

    apt_get: bool  # apt-get is on the pod
    dpkg: bool  # dpkg-query is, and answered
    installed: tuple[str, ...]  # the packages asked for that dpkg has installed, sorted


def probe_lines(packages: list[str]) -> list[str]:
    """Return the probe lines the packages role reads, read-only: ``apt.get 1`` when apt-get
    is there (else 0), and ``apt.status`` with what dpkg knows of each of ``packages`` (one
    dpkg has never seen prints nothing)."""
    names = " ".join(shlex.quote(p) for p in packages)
    query = f"dpkg-query -W -f {shlex.quote(DPKG_FORMAT)} -- {names} 2>/dev/null"
    return [
        "if command -v apt-get >/dev/null 2>&1; then echo 'apt.get 1'; else echo 'apt.get 0'; fi",
        f'if command -v dpkg-query >/dev/null 2>&1; then echo "apt.status $({query} | b64)"; fi',
    ]


def parse(output: list[str]) -> Apt:
    """Return the probe's :class:`Apt` from its ``apt.*`` lines.

    A package counts as installed when dpkg's status is installed, or installed with only
    its triggers pending (``ii``, ``iW``, ``it``: its files are in place and configured).
    """
    fields, installed = by_key(output), set()
    for line in decode(fields.get("status", "")).splitlines():
        name, _, status = line.partition(" ")
        if status[1:2] in ("i", "W", "t"):
            installed.add(name.split(":", 1)[0])
    return Apt(
        apt_get=fields.get("get") == "1",
        dpkg="status" in fields,
        installed=tuple(sorted(installed)),
    )


SECTION = Section(
    "apt",
    fields=("apt",),
    parse=lambda answer: {"apt": parse(answer.lines("apt")) if "apt" in answer else None},
    lines=lambda arguments: probe_lines(arguments["apt"]) if arguments["apt"] else (),
    arguments=(Argument("apt", sent=lambda packages: list(packages) or None),),
)
