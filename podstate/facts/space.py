"""The probe's free space: the container disk (/), /dev/shm, and each path the disk role names."""

from __future__ import annotations

from dataclasses import dataclass

from podstate.facts.decode import decode
from podstate.facts.section import Answer, Argument, Section
from podstate.shell import b64, quote_path

# One line per filesystem stat answers for (none for a missing /dev/shm): ``fs NAME BLOCK
# FREE BLOCKS``.
STATFS = 'stat -f -c "fs %n %S %a %b" / /dev/shm 2>/dev/null'


@dataclass(frozen=True)
class Space:
    """The sizes of the container disk and /dev/shm, in bytes; None where unknown."""

    shm_size: int | None  # /dev/shm (None: absent, or unreadable)
    disk_free: int | None  # free on / (the container disk)
    disk_size: int | None  # the size of /


def free_lines(paths: list[str]) -> list[str]:
    """Return the probe lines that read the free space at each of ``paths`` (``free NAME
    BLOCK FREE``, nothing after NAME when stat fails there)."""
    return [
        f'echo "free {b64(path)} $(stat -f -c "%S %a" -- {quote_path(path)} 2>/dev/null)"'
        for path in paths
    ]


def parse(output: list[str]) -> Space:
    """Return the probe's :class:`Space` from its ``fs`` lines."""
    statfs = {}
    for line in output:
        name, *numbers = line.partition(" ")[2].split(" ")
        statfs[name] = numbers
    shm = statfs.get("/dev/shm", [])  # block size, blocks free, blocks
    disk = statfs.get("/", [])
    return Space(
        shm_size=int(shm[0]) * int(shm[2]) if len(shm) == 3 else None,
        disk_free=int(disk[0]) * int(disk[1]) if len(disk) == 3 else None,
        disk_size=int(disk[0]) * int(disk[2]) if len(disk) == 3 else None,
    )


def parse_free(output: list[str]) -> dict[str, int | None]:
    """Return the probe's ``free`` dict from its ``free`` lines: bytes free at each path
    asked, None where it is unknown."""
    free = {}
    for line in output:
        name, *numbers = line.partition(" ")[2].split(" ")
        free[decode(name)] = int(numbers[0]) * int(numbers[1]) if len(numbers) == 2 else None
    return free


def _sizes(answer: Answer) -> dict[str, int | None]:
    """Return the ``Probe`` fields of the ``fs`` lines: shared memory's size, the disk's."""
    space = parse(answer.lines("fs"))
    return {"shm_size": space.shm_size, "disk_free": space.disk_free, "disk_size": space.disk_size}


SECTION = Section(
    "space",
    fields=("shm_size", "disk_free", "disk_size"),
    parse=_sizes,
    lines=lambda arguments: (STATFS,),
)
FREE = Section(
    "free",
    fields=("free",),
    parse=lambda answer: {"free": parse_free(answer.lines("free"))},
    lines=lambda arguments: free_lines(arguments["free"] or []),
    arguments=(Argument("free", sent=list),),
)
