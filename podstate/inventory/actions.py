"""Stopping a pod through its provider's API: the one action ``podstate watch`` takes on a
pod rather than in it (``idle: {action: stop}``).

A provider is named by the pod's host data ``provider`` (``runpod``, ``vast``); each has one
function in ``STOPPERS`` that sends its stop request and returns ``Stopped``. A pod of a
pods file has no provider's id: it cannot be stopped.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from podstate.inventory import api_http, runpod_client, vast_client
from podstate.inventory.runpod_client import InventoryError


@dataclass(frozen=True)
class Stopped:
    """What a stop request came to: ``ok`` when the provider took it, else ``why`` not (its
    status and problem detail, in one line)."""

    ok: bool
    why: str | None = None


def stop(data: dict[str, Any]) -> Stopped:
    """Ask the provider of the pod whose host data is ``data`` to stop it; return what came
    of it (never raises for the provider's answer: a refusal is an event, not a crash)."""
    stopper = STOPPERS.get(str(data.get("provider")))
    if stopper is None or not data.get("pod_id"):
        return Stopped(False, "no provider API lists this pod (a pods file's): stop it yourself")
    return stopper(str(data["pod_id"]))


def runpod_stop(pod_id: str) -> Stopped:
    """Stop a RunPod pod: ``POST /v2/pods/{id}/action`` with ``{"action": "stop"}`` (200:
    stopped; 409: not in a status that may stop; 403, 429, 5xx: refused for now)."""
    try:
        config = runpod_client.settings()
        api = runpod_client.api(config)
        url = f"{config.base_url}/v2/pods/{urllib.parse.quote(pod_id, safe='')}/action"
        request = api_http.authorized(url, api, method="POST", data={"action": "stop"})
        status, _, body = api_http.send(api_http.opener(url), request, api)
    except InventoryError as e:
        return Stopped(False, str(e))
    if 200 <= status < 300:
        return Stopped(True)
    detail = runpod_client.problem_detail(body, config)
    said = f"RunPod answered {status}" + (f": {detail}" if detail else "")
    if status == 409:
        return Stopped(False, f"{said} (its status allows no stop now)")
    return Stopped(False, said)


def vast_stop(instance_id: str) -> Stopped:
    """Stop a Vast instance: ``PUT /api/v0/instances/{id}`` with ``{"state": "stopped"}``
    (200 with ``success``: stopped; 400, 404: not this instance; 401, 429, 5xx: refused
    for now). Vast keeps its container disk; its processes and ``/dev/shm`` go."""
    try:
        config = vast_client.settings()
        api = config.api()
        url = f"{config.base_url}/api/v0/instances/{urllib.parse.quote(instance_id, safe='')}"
        request = api_http.authorized(url, api, method="PUT", data={"state": "stopped"})
        status, _, body = api_http.send(api_http.opener(url), request, api)
    except InventoryError as e:
        return Stopped(False, str(e))
    detail = vast_client.detail(body, api)
    if status == 200 and _succeeded(body):
        return Stopped(True)
    return Stopped(False, f"Vast answered {status}" + (f": {detail}" if detail else ""))


def _succeeded(body: bytes) -> bool:
    """Return whether a Vast answer says ``"success": true``."""
    try:
        return json.loads(body.decode("utf-8")).get("success") is True
    except (UnicodeDecodeError, ValueError, AttributeError, RecursionError):
        return False


STOPPERS: dict[str, Callable[[str], Stopped]] = {"runpod": runpod_stop, "vast": vast_stop}
