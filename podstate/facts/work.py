"""The probe's work section: whether the pod's processes worked since its idle period began,
whatever their GPUs read (a CPU-only job, a download, ``nohup`` or ``setsid`` work, a
non-interactive ``ssh pod cmd``), which podstate.facts.activity adds to the GPU readings.

Work over a period needs two readings, so the period lives on the pod: ``IDLE_RECORD`` (on
the container disk, wiped with it, and naming the container it is for) holds since when the
pod's processes have been quiet and their counters then. Every probe compares the counters
now with them (scripts/work.sh, with the shell's own ``read``: no program per process), and
any work, or a process it cannot read, begins a new period there. Every watch, and every
run, reads the same clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from podstate.facts.decode import decode
from podstate.facts.section import Section
from podstate.paths import IDLE_RECORD
from podstate.shell import script

CPU_FLOOR_CS = 100  # CPU time the pod's processes may use in any period: 1 s ...
CPU_SHARE_PER_MILLE = 10  # ... plus 1 % of one CPU over the period
IO_FLOOR_BYTES = 1 << 20  # bytes they may read and write in any period: 1 MiB ...
IO_RATE_BYTES = 4096  # ... plus 4 KiB a second of the period
KINDS = ("cpu", "io", "new", "gone", "run", "ssh")


@dataclass(frozen=True)
class Sign:
    """One sign that the pod's processes worked since its idle period began."""

    kind: str  # one of KINDS
    pid: int
    command: str  # its /proc/PID/comm
    amount: int | None  # centiseconds of CPU ("cpu") or bytes ("io"), else None


@dataclass(frozen=True)
class Unread:
    """A process whose counters the probe cannot read (another user's)."""

    pid: int
    command: str


@dataclass(frozen=True)
class Work:
    """What the pod's processes did since its idle period began."""

    age: float | None  # seconds since the period began; None: unknown
    busy: tuple[Sign, ...] = ()  # each sign of work
    unread: tuple[Unread, ...] = ()  # each process whose counters cannot be read


def probe_lines() -> list[str]:
    """Return the probe lines that compare the pod's processes' counters with those of its
    idle period's start (``work.busy``, ``work.unread``, ``work.unkept``, ``work.age``),
    beginning a new period in ``IDLE_RECORD`` when they worked."""
    limits = f"{CPU_FLOOR_CS} {CPU_SHARE_PER_MILLE} {IO_FLOOR_BYTES} {IO_RATE_BYTES}"
    return [script("work.sh"), f"work {IDLE_RECORD} {limits}"]


def parse(output: list[str]) -> Work:
    """Return the probe's :class:`Work`; its ``age`` is None when it is not known: no
    ``work.age`` line, or a record that cannot be kept."""
    age: float | None = None
    kept = True
    busy: list[Sign] = []
    unread: list[Unread] = []
    for line in output:
        key, *words = line.split(" ")
        if key == "work.age":
            age = int(words[0]) / 100
        elif key == "work.unkept":
            kept = False
        elif key == "work.unread":
            unread.append(Unread(int(words[0]), decode(words[1]).strip()))
        elif key == "work.busy":
            kind, pid, comm, *amount = words
            if kind not in KINDS:
                raise ValueError(f"unknown kind of work {kind!r}")
            busy.append(
                Sign(kind, int(pid), decode(comm).strip(), int(amount[0]) if amount else None)
            )
    return Work(age=age if kept else None, busy=tuple(busy), unread=tuple(unread))


def describe(sign: Sign) -> str:
    """Return one sign of work in words, for the check's ``in use`` list."""
    who = f"{sign.command} (pid {sign.pid})"
    kind = sign.kind
    if kind == "cpu":
        return f"{(sign.amount or 0) / 100:.1f} s of CPU since the idle period began, most by {who}"
    if kind == "io":
        return f"{_bytes(sign.amount or 0)} read and written since it began, most by {who}"
    if kind == "new":
        return f"process {who} started since the idle period began"
    if kind == "gone":
        return f"process {sign.pid} ended since the idle period began"
    if kind == "run":
        return f"process {who} is running on a CPU (or waiting on a disk) now"
    return f"SSH session: {who}"


def _bytes(amount: int) -> str:
    """Return a byte count in words: ``512 B``, ``3.2 MiB``."""
    value, unit = float(amount), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{amount} B" if unit == "B" else f"{value:.1f} {unit}"


SECTION = Section(
    "work",
    fields=("work",),
    parse=lambda answer: {"work": parse(answer.lines("work"))},
    lines=lambda arguments: probe_lines(),
)
