"""The order of podstate's run on a pod: one table, which the deploy runs, the probe reads
and the docs show.

Between the two bookends (podstate.pod.bookends: ``start`` takes the pod lock for every
deploy file and folds podstate's changes into one command; ``finish`` releases the lock and
reports what apply cannot fix), the deploy reads the pod once, with what every phase reads,
and plans ``PHASES`` in order. Each phase returns what it found and did
(podstate.run.findings ``Result``); one whose role returned False (the container disk
role, on a pod that failed there) stops the phases after it. The ``last`` phases are planned after
every deploy file's operations: they record and mark what the others did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from pyinfra import host

from podstate.desired.state import State
from podstate.facts.probe import Probe
from podstate.facts.request import Request
from podstate.roles import (
    authorized_keys,
    boot,
    disk,
    download,
    env,
    files,
    gpu,
    packages,
    ready,
    removal,
    repos,
    scratch,
    secrets,
    shm,
    venv,
)
from podstate.run import findings
from podstate.run.findings import Result


@dataclass(frozen=True)
class Phase:
    """One step of podstate's run on a pod: its ``name``, ``why`` it is where it is, what
    plans it (``apply(wanted, probe)``), what it needs the probe to read (its role's
    ``reads``), and whether it is planned ``last``, after every deploy file's operations."""

    name: str
    why: str
    apply: Callable[[State, Probe], Result]
    reads: Callable[[State], Request]
    last: bool = False


def _role(
    module: ModuleType,
    why: str,
    *,
    name: str | None = None,
    apply: Callable[[State, Probe], Result] | None = None,
    last: bool = False,
) -> Phase:
    """Return the phase of the role ``module``: its ``apply`` and ``reads`` unless told."""
    short = name or module.__name__.rsplit(".", 1)[1]
    return Phase(short, why, apply or module.apply, module.reads, last)


def _declare_boot(wanted: State, probe: Probe) -> Result:
    """Return what the boot role says the hook makes (its result, not a deploy: it adds no
    operation), said before the removal, so that a violation that stops the hook's own
    phase removes none of it."""
    with findings.recording(host, "Boot") as result:
        boot.declare(wanted)
    return result


PHASES: tuple[Phase, ...] = (
    _role(disk, "first: a pod whose container disk fails gets no other role"),
    _role(packages, "before the roles that may need what it installs"),
    _role(gpu, "what the GPUs are, for the roles that render for them"),
    _role(download, "the network's speed, before anything downloads"),
    _role(scratch, "the scratch mounts, before the directories in them"),
    _role(shm, "the size of /dev/shm"),
    _role(secrets, "before env: the profile sources the secrets file"),
    _role(env, "directories and variables, one profile every shell reads"),
    _role(files, "the declared files"),
    _role(authorized_keys, "the declared SSH keys"),
    _role(venv, "the venv, on the directories and variables above"),
    _role(repos, "the repositories, last of the roles"),
    _role(ready, "names a restart; installs podstate-ready, violations or not",
          apply=ready.command, last=True),
    _role(boot, "what the hook makes, said before removal, so none of it goes",
          name="boot record", apply=_declare_boot, last=True),
    _role(removal, "once every role said what it makes: what is no longer declared goes",
          last=True),
    _role(boot, "the hook and its data, once everything else is planned", last=True),
    _role(ready, "the ready marker, only where no violation stands",
          name="marker", apply=ready.marker, last=True),
)  # fmt: skip


def contents() -> str:
    """Return the run's order as a numbered table of contents, the bookends included: what
    the deploy's docstring and docs/ARCHITECTURE.md show."""
    rows = [("start", "the pod lock for every deploy file, the fold of podstate's changes")]
    rows.append(("probe", "one command reads what every phase below reads"))
    rows += [(p.name + (" (last)" if p.last else ""), p.why) for p in PHASES]
    rows.append(("finish", "the release of the lock, the report of what apply cannot fix"))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{i:2}. {name:<{width}}  {why}" for i, (name, why) in enumerate(rows, 1))


def readers() -> tuple[Callable[[State], Request], ...]:
    """Return what the phases read, in order, each role's once (ready and boot plan two
    phases each): the probe of the deploy is their merge."""
    return tuple(dict.fromkeys(p.reads for p in PHASES))
