"""``@role``: a pyinfra ``@deploy`` that also tells the check which operations are its own,
and gives the role the pod probe (``probed``); ``read_probe``, how a role reads the pod
(podstate's own deploy reads once for every role, podstate.pod.probe, through the same
call)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any, TypeVar

from pyinfra import host, state
from pyinfra.api import deploy

from podstate import settings
from podstate.desired.state import State
from podstate.desired.typed import build
from podstate.facts import activity
from podstate.facts.probe import PodProbe, Probe
from podstate.facts.request import Request
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import findings, lock, login

Wanted = State
R = TypeVar("R")
Apply = Callable[[Wanted, Probe], R]
# a role called from a team's deploy file may be given host.data.podstate as it is
Applied = Callable[[Wanted | Mapping[str, Any], Probe | None], R | None]


def typed(wanted: Wanted | Mapping[str, Any]) -> Wanted:
    """Return ``wanted`` as a typed State: a normalized desired state as host data holds it
    (``host.data.podstate``, which a team's deploy file may pass a role) is built here."""
    return wanted if isinstance(wanted, State) else build(wanted)


def probed(
    reads: Callable[[Wanted], Request], when: Callable[[Wanted], object] | None = None
) -> Callable[[Apply[R]], Applied[R]]:
    """Return a decorator that gives a role's ``apply(wanted, probe)`` the pod probe.

    The function made takes ``probe=None``: podstate's own deploy passes the probe it read
    once for every role; a role called alone reads ``reads(wanted)`` itself
    (``read_probe``). It returns None without running the role when ``when(wanted)`` says
    there is nothing to do (checked first, so nothing is read for it) or when the probe could
    not be read (pyinfra has then failed the pod already); else what the role returns.
    """

    def decorator(func: Apply[R]) -> Applied[R]:
        @wraps(func)
        def call(given: Wanted | Mapping[str, Any], probe: Probe | None = None) -> R | None:
            wanted = typed(given)
            if when is not None and not when(wanted):
                return None
            probe = probe or read_probe(reads(wanted))
            return None if probe is None else func(wanted, probe)

        return call

    return decorator


def role(
    name: str,
    reads: Callable[[Wanted], Request] | None = None,
    when: Callable[[Wanted], object] | None = None,
) -> Callable[[Callable[..., object]], Callable[..., findings.Result]]:
    """Return a decorator that makes a role's ``apply(wanted, probe)`` the pyinfra deploy
    ``name``, given the probe as ``probed(reads, when)`` gives it; without ``reads``, the
    function is the deploy as it is, with its own arguments (``podstate uninstall``'s,
    given the probe its deploy file read).

    The function made returns what the role found and did (``findings.Result``: what the
    role's code recorded while it ran, with its own return value as ``value``), which is
    also the pod's for the phases after it and the report.

    Every operation the deploy adds on a pod is recorded under ``name`` (by operation hash),
    so ``podstate check`` reports a change with its role from data, and tells podstate's
    own operations (which take the pod lock themselves) from those of other deploy files.
    """

    def decorator(func: Callable[..., object]) -> Callable[..., findings.Result]:
        deployed = deploy(name)(func if reads is None else probed(reads, when)(func))

        @wraps(func)
        def call(*args: Any, **kwargs: Any) -> findings.Result:
            before = pyinfra_plan.op_hashes(state, host)
            try:
                with findings.recording(host, name) as result:
                    result.value = deployed(*args, **kwargs)
            finally:
                found = findings.of(host)
                found.roles.setdefault(name, None)
                for op_hash in pyinfra_plan.op_hashes(state, host) - before:
                    found.ops[op_hash] = name
            return result

        return call

    return decorator


def read_probe(request: Request) -> Probe | None:
    """Return the pod probe that reads ``request``, in one command (another run's live pod
    lock waited for first, and what the probe saw of it kept for this run's first take).

    None when the probe failed; pyinfra has then already failed the pod.
    """
    wait = min(lock.probe_wait, settings.COMMAND_TIMEOUT // 2)
    arguments = {**request.arguments(), "lock_wait": wait, "_stdin": request.stdin(wait)}
    # A probe without an answer is not failed yet: the login shell may have run nothing
    # (Vast's tmux), which podstate.run.login names or fixes before probing again.
    found = host.get_fact(PodProbe, **arguments, _ignore_errors=True)
    if found is None:
        found = login.recover(lambda: host.get_fact(PodProbe, **arguments))
    if found is not None:
        lock.read(host, found.lock)
        findings.of(host).activity = activity.read(found)
    return found
