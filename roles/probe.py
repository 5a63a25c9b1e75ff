"""How a role reads the pod: the one probe of a request (not a role itself).

A role called alone (from a team's own deploy file) reads what its ``reads`` asks for;
podstate's own deploy reads once for every role (podstate.pod.probe), through the same call.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host

from podstate import settings
from podstate.facts.probe import PodProbe
from podstate.facts.request import Request
from podstate.run import lock


def read_probe(request: Request) -> dict[str, Any] | None:
    """Return the pod probe that reads ``request``, in one command (another run's live pod
    lock waited for first, and what the probe saw of it kept for this run's first take).

    None when the probe failed; pyinfra has then already failed the pod.
    """
    found = host.get_fact(
        PodProbe,
        **request.arguments(),
        lock_wait=min(lock.probe_wait, settings.COMMAND_TIMEOUT // 2),
        _stdin=request.stdin(),
    )
    if found is not None:
        lock.read(host, found["lock"])
    return found
