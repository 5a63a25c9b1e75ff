"""The lock and the report that span every deploy file of a run.

``pyinfra -y inventories/pods.py deploy/*.py`` runs the files in name order, whatever their
names. ``add()``, called by podstate's own deploy file, puts two operations before the
first operation of any file (one makes the other files' changes take the pod lock, as
podstate's own do; one folds podstate's own changes into one command) and two after the
last (release the lock; fail the pod with the violations, once).
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, state

from podstate import findings, operations, pyinfra_api


def add(waivers: list[dict[str, Any]] | None = None) -> None:
    """Add the lock and report operations for the current pod, around every deploy file;
    the report honours ``waivers``."""
    hashes = []
    for add_op, name, args in (
        (operations.lock_other_files, "Pod lock for other deploy files", {}),
        (operations.fold_changes, "Fold podstate's changes into one command", {}),
        (operations.release_lock, "Release the pod lock", {}),
        (operations.violations, "Report what apply cannot fix", {"waivers": waivers}),
    ):
        before = set(state.ops.get(host, ()))
        add_op(name=name, **args)
        hashes += set(state.ops.get(host, ())) - before
    findings.of(host).bookkeeping |= set(hashes)
    pyinfra_api.bookend(host, first=hashes[:2], last=hashes[2:])
