"""``@role``: a pyinfra ``@deploy`` that also tells the check which operations are its own;
and ``read_probe``, how a role reads the pod (podstate's own deploy reads once for every
role, podstate.pod.probe, through the same call)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from pyinfra import host, state
from pyinfra.api import deploy

from podstate import settings
from podstate.facts import activity
from podstate.facts.probe import PodProbe
from podstate.facts.request import Request
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import findings, lock, login

F = TypeVar("F", bound=Callable[..., Any])


def role(name: str) -> Callable[[F], F]:
    """Return a decorator that makes a function the pyinfra deploy ``name``.

    Every operation the deploy adds on a pod is recorded under ``name`` (by operation hash),
    so ``podstate check`` reports a change with its role from data, and tells podstate's
    own operations (which take the pod lock themselves) from those of other deploy files.
    """

    def decorator(func: F) -> F:
        deployed = deploy(name)(func)

        @wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            before = pyinfra_plan.op_hashes(state, host)
            try:
                return deployed(*args, **kwargs)
            finally:
                found = findings.of(host)
                found.roles.setdefault(name, None)
                for op_hash in pyinfra_plan.op_hashes(state, host) - before:
                    found.ops[op_hash] = name

        return call  # type: ignore[return-value]

    return decorator


def read_probe(request: Request) -> dict[str, Any] | None:
    """Return the pod probe that reads ``request``, in one command (another run's live pod
    lock waited for first, and what the probe saw of it kept for this run's first take).

    None when the probe failed; pyinfra has then already failed the pod.
    """
    arguments = {
        **request.arguments(),
        "lock_wait": min(lock.probe_wait, settings.COMMAND_TIMEOUT // 2),
        "_stdin": request.stdin(),
    }
    # A probe without an answer is not failed yet: the login shell may have run nothing
    # (Vast's tmux), which podstate.run.login names or fixes before probing again.
    found = host.get_fact(PodProbe, **arguments, _ignore_errors=True)
    if found is None:
        found = login.recover(lambda: host.get_fact(PodProbe, **arguments))
    if found is not None:
        lock.read(host, found["lock"])
        findings.of(host).activity = activity.read(found)
    return found
