"""The lock and the report that span every deploy file of a run.

``pyinfra -y inventories/pods.py deploy/*.py`` runs the files in name order, whatever their
names. Podstate's own deploy file calls ``start()`` before its roles and ``finish()`` after
them. ``start`` puts two operations before the first operation of any file (one makes the
other files' changes take the pod lock, as podstate's own do; one folds podstate's own
changes into one command); ``finish`` puts two after the last (release the lock; fail the
pod with the violations, once). The report is planned after the roles have recorded their
violations, so a dry run shows it as the change it is.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, state

from podstate import findings, operations, pyinfra_api

_FIRST: dict[str, list[str]] = {}  # each pod's first operations, from start() to finish()


def _add(*ops: tuple[Any, str, dict[str, Any]]) -> list[str]:
    """Add ``ops`` (operation, name, arguments) for the current pod; return their hashes."""
    hashes = []
    for add_op, name, args in ops:
        before = set(state.ops.get(host, ()))
        add_op(name=name, **args)
        hashes += set(state.ops.get(host, ())) - before
    findings.of(host).bookkeeping |= set(hashes)
    return hashes


def start() -> None:
    """Add the lock and fold operations, before every deploy file's operations."""
    first = _add(
        (operations.lock_other_files, "Pod lock for other deploy files", {}),
        (operations.fold_changes, "Fold podstate's changes into one command", {}),
    )
    _FIRST[host.name] = first
    pyinfra_api.bookend(host, first=first, last=[])


def finish(waivers: list[dict[str, Any]] | None = None) -> None:
    """Add the release and report operations, after every deploy file's operations; the
    report honours ``waivers``."""
    last = _add(
        (operations.release_lock, "Release the pod lock", {}),
        (operations.violations, "Report what apply cannot fix", {"waivers": waivers}),
    )
    pyinfra_api.bookend(host, first=_FIRST.pop(host.name, []), last=last)
