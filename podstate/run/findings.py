"""What the roles found on each pod beyond pyinfra's own change tracking.

Violations (what apply cannot fix) and file diffs are recorded here per pod while the
deploy is planned, so ``pyinfra`` can fail the pod at the end and ``podstate check`` can
report them with the role they belong to.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Any, NamedTuple

from pyinfra import host as current_host
from pyinfra.api import Host

from podstate.desired.state import Waiver
from podstate.facts.record import Entry
from podstate.pyinfra_api import plan as pyinfra_plan


class Violation(NamedTuple):
    """Something apply cannot fix: the role that found it, its stable id, and the message."""

    role: str
    finding: str
    message: str


class Restorable(NamedTuple):
    """A file a role writes, which the boot hook can put back after a restart
    (roles/boot.py): its ``content`` and ``mode``; ``safe``: its content for GPUs that
    cannot be read, which the hook puts back instead when the GPUs it finds are not the
    ones ``content`` was rendered for; ``before``: the role writes it (or finds it so)
    before the hook's data is written, which then copies it on the pod (not podstate's
    record of what it made, rewritten around the data)."""

    content: str
    mode: str
    safe: str | None = None
    before: bool = True


@dataclass
class Result:
    """What one call of a role found and did on a pod: what ``@role`` returns
    (podstate.run.role), and what the phases after it read (through ``Findings``).

    ``made``: what it makes or edits, by path, for the record of what podstate made
    (roles/removal.py); ``violations``: what apply cannot fix; ``restorable``: the files
    it writes that the boot hook can put back, and ``hooked``: the user's files it puts
    podstate's block in (roles/boot.py); ``left``: what a record names that now holds
    something else, which podstate leaves as it is; ``value``: what the role's own
    function returned (the container disk role's False: the pod failed there)."""

    role: str
    made: dict[str, Entry] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    restorable: dict[str, Restorable] = field(default_factory=dict)
    hooked: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)
    value: object = None


@dataclass
class Findings:
    """What podstate learnt about one pod while planning, for the apply's end and the check.

    ``violations``: what apply cannot fix; ``diffs``: unified diffs by operation hash; ``ops``:
    the role of each of podstate's own operations, by hash; ``roles``: the roles planned, in
    order (a dict used as an ordered set); ``bookkeeping``: the hashes of the lock and report
    operations, which are no change of the pod; ``locked``: a command of this run took the
    pod lock; ``labels``: what a change of this pod is, in words, by operation hash (the
    check shows it instead of the operation's name, which is the same on every pod);
    ``secret``: the hashes of operations that upload a secret, whose changes no report
    shows a diff of; ``restarted``: how the pod was re-created since podstate last applied
    to it (``applied_at``, ``since``), None if it was not; ``ready``: the pod's ready
    marker is for the desired state being planned; ``results``: what each role planned so
    far found and did (``Result``), in order, read merged as ``made``, ``restorable``,
    ``hooked`` and ``left``; ``running``: the results of the roles being planned now,
    innermost last; ``boot``: what the boot hook did at this container's start
    (roles/boot.py), None when no hook is asked for (or it cannot work on this pod);
    ``first``: the operations that run before every other (the pod lock, the fold, the
    records' first write);
    ``busy``: the owner line of another run that held the pod lock when the probe read the
    pod (it was changing the pod: what the probe read may be halfway through that), None
    when no run held it;
    ``activity``: whether the pod is in use now (``podstate.facts.activity.read``), None
    before the probe; ``apt_updated``: this run's ``apt-get update`` is planned already (a
    second call of the packages role, from a team's own deploy file, does not update again).
    """

    violations: list[Violation] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    ops: dict[str, str] = field(default_factory=dict)
    roles: dict[str, None] = field(default_factory=dict)
    bookkeeping: set[str] = field(default_factory=set)
    locked: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    secret: set[str] = field(default_factory=set)
    restarted: dict[str, Any] | None = None
    ready: bool = False
    results: list[Result] = field(default_factory=list)
    running: list[Result] = field(default_factory=list)
    boot: dict[str, Any] | None = None
    first: list[str] = field(default_factory=list)
    activity: dict[str, Any] | None = None
    busy: str | None = None
    apt_updated: bool = False

    @property
    def made(self) -> dict[str, Entry]:
        """What this run's roles make or edit on the pod, by path (a later role's entry for
        a path replaces an earlier one's): the record's new entries."""
        return {path: entry for result in self.results for path, entry in result.made.items()}

    def makes(self, path: str) -> bool:
        """Return whether a role of this run makes or edits ``path``: ``path in made``
        without merging every result, for the checks made once per entry."""
        return any(path in result.made for result in self.results)

    @property
    def restorable(self) -> dict[str, Restorable]:
        """The files this run's roles write that the boot hook can put back, by path."""
        return {p: file for result in self.results for p, file in result.restorable.items()}

    @property
    def hooked(self) -> list[str]:
        """The user's files this run's roles put podstate's block in, in order."""
        return [path for result in self.results for path in result.hooked]

    @property
    def left(self) -> dict[str, str]:
        """What the records name that now holds something else, left as it is, by path."""
        return {path: why for result in self.results for path, why in result.left.items()}

    def result(self) -> Result:
        """Return the result of the role being planned, or of podstate's own code outside
        every role (made on first use)."""
        if self.running:
            return self.running[-1]
        if not self.results or self.results[0].role != "podstate":
            self.results.insert(0, Result("podstate"))
        return self.results[0]


def of(host: Host) -> Findings:
    """Return the findings of ``host`` in this run, created empty on first use (kept on the
    run's host object: a new plan, a check after an apply in one process, starts with none)."""
    return pyinfra_plan.kept(host, Findings)


@contextmanager
def recording(host: Host, role: str) -> Iterator[Result]:
    """Return, as a context, the result of one call of ``role`` on ``host``: what the code
    in the context records goes into it, and it is the pod's, in order, for the phases
    after it and the report."""
    found, result = of(host), Result(role)
    found.results.append(result)
    found.running.append(result)
    try:
        yield result
    finally:
        found.running.pop()


def violation(message: str, finding: str | None = None) -> None:
    """Record something apply cannot fix on the current pod, under the role being planned.

    ``finding`` is its stable id (``shm.min_size``, ``gpu.healthy``, ``dirs.TMPDIR``), which
    every report carries and waivers match; by default the role's name.
    """
    role = pyinfra_plan.current_deploy(current_host) or "podstate"
    entry = Violation(role, finding or role.lower().replace(" ", "_"), message)
    found = of(current_host)
    if entry not in found.violations:
        found.violations.append(entry)
        found.result().violations.append(entry)


def record_diff(path: str, old: str | None, new: str, gone: bool = False) -> None:
    """Record the unified diff a managed file operation would apply on the current pod
    (``gone``: the file is removed)."""
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"{path} (pod)" if old is not None else "/dev/null",
        tofile="/dev/null" if gone else f"{path} (desired)",
    )
    of(current_host).diffs[pyinfra_plan.current_op(current_host)] = "".join(lines)


def restorable(
    path: str, content: str, mode: str, safe: str | None = None, before: bool = True
) -> None:
    """Record a file the current role writes on the pod, which the boot hook can put back
    after a restart (``Restorable`` says what each argument means)."""
    of(current_host).result().restorable[path] = Restorable(content, mode, safe, before)


def made(entry: Entry) -> None:
    """Record that the current pod's deploy makes or edits ``entry.path`` (an entry of the
    record of what podstate made, podstate.facts.record)."""
    of(current_host).result().made[entry.path] = entry


def left(path: str, message: str) -> None:
    """Record that ``path``, which podstate made, now holds something else: left as it is."""
    of(current_host).result().left[path] = message


def hooked(path: str) -> None:
    """Record that the current role puts podstate's block in the user's file ``path``,
    which the boot hook puts back at a container start."""
    of(current_host).result().hooked.append(path)


def describe(text: str) -> None:
    """Record what the current operation would change on the current pod, in words."""
    of(current_host).labels[pyinfra_plan.current_op(current_host)] = text


def mark_secret() -> None:
    """Record that the current operation uploads a secret: its change never has a diff."""
    found, op_hash = of(current_host), pyinfra_plan.current_op(current_host)
    found.secret.add(op_hash)
    found.diffs.pop(op_hash, None)


@dataclass
class Waived:
    """A pod's violations sorted by its waivers: those that still fail, those a waiver holds
    back (with the waiver), and the waivers to clean up (expired, or matching nothing)."""

    failing: list[Violation]
    waived: list[tuple[Violation, Waiver]]
    stale: list[str]


def waive(violations: list[Violation], waivers: Sequence[Waiver], today: date) -> Waived:
    """Return ``violations`` sorted by ``waivers`` as of ``today``.

    A waiver (``finding``: an id or a glob, ``until``: the last day, ``reason``) holds back
    the violations it matches until its day has passed; after that they fail as before.
    """
    result = Waived([], [], [])
    used: set[int] = set()
    for v in violations:
        match = next(
            (
                (i, w)
                for i, w in enumerate(waivers)
                if w.until >= today and fnmatch.fnmatchcase(v.finding, w.finding)
            ),
            None,
        )
        if match:
            used.add(match[0])
            result.waived.append((v, match[1]))
        else:
            result.failing.append(v)
    for i, w in enumerate(waivers):
        if w.until < today:
            result.stale.append(f"waiver for {w.finding} expired on {w.until}")
        elif i not in used:
            result.stale.append(f"waiver for {w.finding} (until {w.until}) matched nothing")
    return result


def waived(host: Host) -> Waived:
    """Return ``host``'s violations sorted by its desired state's waivers (host data
    ``podstate``), as of today (``waive``).

    The one place waivers are applied: the apply's report (``bookkeeping.violations``) and
    the check's verdict both call it, with the same input, so they cannot disagree on a pod.
    """
    waivers = (host.data.get("podstate") or {}).get("waivers") or []
    return waive(of(host).violations, [Waiver(**w) for w in waivers], date.today())
