"""The probe's reading of the pod lock: how many times it was taken, whether a live run holds
it and who that run is (podstate.run.lock takes it from there).

A lock that is there is read under the lock's mutex (shared; each writer in scripts/lock.sh
holds it exclusively): the keeper rewrites ``expires`` in place every second, and a read
between its truncation and its write would find a held lock free. A lock that is not there
needs no mutex, so the probe of a pod no run holds starts no ``flock``: the count of takes is
read first, then the lock's directory found missing. A take makes the directory before it
counts, so a count read while a take writes it is read again under the mutex, with the
directory there; and a take after the read counts one more than the probe read, which the
apply's own take finds (``seen`` in scripts/lock.sh): it changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from podstate.facts.section import Argument, Section
from podstate.paths import LOCK

# Why the holder cannot be named: the mutex stayed taken (a writer stopped inside it).
NO_MUTEX = "a run whose lock could not be read: its mutex stayed taken for 10 s"


@dataclass(frozen=True)
class LockReading:
    """The pod lock as the probe read it."""

    gen: int  # how many times it was taken
    held: bool  # a live run holds it
    owner: str | None  # that run's owner line; None when free


def probe_lines(lock_wait: int) -> list[str]:
    """Return the probe lines that wait up to ``lock_wait`` seconds for another run's live
    lock, so that an apply plans from what that run left, not from a pod halfway through
    it, then print ``lock GEN held|free`` and, when held, ``lock.owner`` and its owner line.
    A lock that cannot be read is held: the safe side for an apply and for a check."""
    return [
        f"L={LOCK}",
        # lockread sets k (held|free), g (the count of takes) and o (the holder's owner line);
        # a pod where no run ever took the lock has no mutex either, and one where no run
        # holds it has no lock directory: its count, read before that, is free
        'lockread() { g=0 k=free o=; [ -e "$L.mutex" ] || return 0; g=;'
        ' { read -r g <"$L.gen"; } 2>/dev/null;'
        ' case $g in "" | *[!0-9]*) ;; *) [ -e "$L" ] || return 0 ;; esac;'
        ' g=0 k=held o="$no_mutex"; { flock -s -w 10 9 && lockstate; } 9<"$L.mutex"; } 2>/dev/null',
        'lockstate() { g=; { read -r g <"$L.gen"; } 2>/dev/null; g=${g:-0} k=free o=;'
        ' [ -d "$L" ] || return 0; e=; { read -r e <"$L/expires"; } 2>/dev/null;'
        # never written (a run killed while taking it): 60 s after it was made, as lock.sh
        ' case $e in ""|*[!0-9]*) e=$(($(stat -c %Y "$L" || echo 0) + 60)) ;; esac;'
        ' [ "$(date +%s)" -le "$e" ] || return 0; k=held; read -r o <"$L/owner"; }',
        f"no_mutex='{NO_MUTEX}'",
        f"n=0; lockread; while [ $n -lt {lock_wait * 5} ] && [ $k = held ]; do sleep 0.2;"
        " n=$((n + 1)); lockread; done",
        'echo "lock $g $k"; [ $k = free ] || printf "lock.owner %s\\n" "$o"',
    ]


def parse(lines: list[str] | None) -> LockReading | None:
    """Return the pod lock as the probe read it, None if it was not read."""
    if not lines:
        return None
    found: tuple[int, bool] | None = None
    owner: str | None = None
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "lock":
            gen, held = rest.split(" ")
            found = (int(gen), held == "held")
        elif key == "lock.owner":
            owner = rest.strip() or "a run that left no owner line"
    if found is None:
        return None
    if found[1] and owner is None:
        owner = "a run that left no owner line"
    return LockReading(gen=found[0], held=found[1], owner=owner)


SECTION = Section(
    "lock",
    fields=("lock",),
    parse=lambda answer: {"lock": parse(answer.lines("lock"))},
    lines=lambda arguments: probe_lines(arguments["lock_wait"]),
    # seconds to wait for another run's live lock: the run's own, given apart from its request
    arguments=(Argument("lock_wait", default=0, sent=None),),
)
