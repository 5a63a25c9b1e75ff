"""What the roles found on each pod beyond pyinfra's own change tracking.

Violations (what apply cannot fix) and file diffs are recorded here per pod while the
deploy is planned, so ``pyinfra`` can fail the pod at the end and ``podstate check`` can
report them with the role they belong to.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from pyinfra import host as current_host
from pyinfra.api import Host


@dataclass
class Findings:
    """What podstate learnt about one pod while planning, for the apply's end and the check.

    ``violations``: (role, message); ``diffs``: unified diffs by operation hash; ``ops``:
    the role of each of podstate's own operations, by hash; ``roles``: the roles planned, in
    order (a dict used as an ordered set); ``bookkeeping``: the hashes of the lock and report
    operations, which are no change of the pod; ``locked``: a command of this run took the
    pod lock.
    """

    violations: list[tuple[str, str]] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    ops: dict[str, str] = field(default_factory=dict)
    roles: dict[str, None] = field(default_factory=dict)
    bookkeeping: set[str] = field(default_factory=set)
    locked: bool = False


_BY_POD: dict[str, Findings] = {}


def reset() -> None:
    """Forget every pod's findings (a new plan in the same process)."""
    _BY_POD.clear()


def of(host: Host) -> Findings:
    """Return the findings of ``host``, created empty on first use."""
    return _BY_POD.setdefault(host.name, Findings())


def violation(message: str, role: str | None = None) -> None:
    """Record something apply cannot fix on the current pod, under ``role`` (by default the
    role being planned)."""
    role = role or current_host.current_deploy_name or "podstate"
    entry = (role, message)
    found = of(current_host)
    if entry not in found.violations:
        found.violations.append(entry)


def record_diff(path: str, old: str | None, new: str) -> None:
    """Record the unified diff a managed file operation would apply on the current pod."""
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"{path} (pod)" if old is not None else "/dev/null",
        tofile=f"{path} (desired)",
    )
    of(current_host).diffs[current_host.current_op_hash] = "".join(lines)
