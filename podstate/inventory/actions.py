"""Stopping a pod through its provider's API: the one action ``podstate watch`` takes on a
pod rather than in it (``idle: {action: stop}``).

A provider is named by the pod's host data ``provider`` (``runpod``, ``vast``); its record
(``podstate.providers``) names the function that sends its stop request and returns
``Stopped``, beside its API client. A pod of a pods file has no provider's id: it cannot be
stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from podstate.providers import registry


@dataclass(frozen=True)
class Stopped:
    """What a stop request came to: ``ok`` when the provider took it, else ``why`` not (its
    status and problem detail, in one line)."""

    ok: bool
    why: str | None = None


def stop(data: dict[str, Any]) -> Stopped:
    """Ask the provider of the pod whose host data is ``data`` to stop it; return what came
    of it (never raises for the provider's answer: a refusal is an event, not a crash)."""
    try:
        provider = registry.named(str(data.get("provider")))
    except KeyError:
        provider = None
    if provider is None or not provider.stop or not data.get("pod_id"):
        return Stopped(False, "no provider API lists this pod (a pods file's): stop it yourself")
    stopped: Stopped = provider.call("stop", str(data["pod_id"]))
    return stopped
