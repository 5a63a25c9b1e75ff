"""The lock and the report that span every deploy file of a run.

``pyinfra -y inventories/pods.py deploy/*.py`` runs the files in name order, whatever their
names. Podstate's own deploy file calls ``start()`` before its roles and ``finish()`` after
them. ``start`` puts two operations before the first operation of any file (one makes the
other files' changes take the pod lock, as podstate's own do; one folds podstate's own
changes into one command); ``finish`` puts what is planned in it (the last phases,
podstate.pod.phases: the ready marker among them) after the last, then two more (release
the lock; fail the pod with the violations, once). They are planned after the roles, so
the marker knows whether a violation stands, and a dry run shows the report as the change
it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyinfra import host, state

from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.pyinfra_api.verify import verify
from podstate.run import bookkeeping, findings


def _add(*ops: tuple[Any, str, dict[str, Any]]) -> list[str]:
    """Add ``ops`` (operation, name, arguments) for the current pod; return their hashes."""
    hashes: list[str] = []
    for add_op, name, args in ops:
        before = pyinfra_plan.op_hashes(state, host)
        add_op(name=name, **args)
        hashes += pyinfra_plan.op_hashes(state, host) - before
    findings.of(host).bookkeeping |= set(hashes)
    return hashes


def start() -> None:
    """Add the lock and fold operations, before every deploy file's operations (once the
    installed pyinfra is verified: a release that lacks an internal stops the run here)."""
    verify()
    found = findings.of(host)
    found.first[:0] = _add(
        (bookkeeping.lock_other_files, "Pod lock for other deploy files", {}),
        (bookkeeping.fold_changes, "Fold podstate's changes into one command", {}),
    )
    pyinfra_plan.bookend(host, first=found.first, last=[])


@contextmanager
def finish() -> Iterator[None]:
    """Put what is planned in this context after every deploy file's operations, then add
    the release and the report (which honours the desired state's waivers)."""
    before = pyinfra_plan.op_hashes(state, host)
    yield
    # The records' first write (roles/removal.py) joined the first operations: put them
    # there before the order of every pod's operations is read (pods already planned have it).
    first = findings.of(host).first
    pyinfra_plan.bookend(host, first=first, last=[])
    marked = [h for h in pyinfra_plan.host_order(state, host) if h not in before | set(first)]
    last = marked + _add(
        (bookkeeping.release_lock, "Release the pod lock", {}),
        (bookkeeping.violations, "Report what apply cannot fix", {}),
    )
    pyinfra_plan.bookend(host, first=first, last=last)
