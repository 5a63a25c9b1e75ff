"""The RunPod API client: ``GET /v2/pods``, with the settings it reads from the environment.

Only the standard library talks HTTP, and the key goes nowhere but the ``Authorization``
header of requests to the configured API: redirects are refused, and no message, log line
or host data ever contains it. Rate limits (429) are waited out within a bound; what may
pass (a 429 past that bound, a 5xx, no answer) is an ``ApiUnavailable``, with the wait the
API asked for, so ``podstate watch`` can back off.

Environment:

``RUNPOD_API_KEY``        the API key (required for this source)
``RUNPOD_API_URL``        base URL, default https://api.runpod.io (plain http: localhost only)
``RUNPOD_API_TIMEOUT``    seconds to wait for the API, default 15
``PODSTATE_CLUSTER_PODS`` 1: manage cluster member pods too (``includeClusterPods=true``)
``PODSTATE_SSH_KEY``      private key file for every pod (host data ``ssh_key``); unset:
                          pyinfra's defaults (SSH agent, ~/.ssh/id_*)
``PODSTATE_API_LISTING``  set by ``podstate watch`` for the runs it starts: a file holding
                          the listing it made this pass (``read_listing``), read instead of
                          asking the API again
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory import api_http
from podstate.inventory.actions import Stopped
from podstate.inventory.api_http import ApiUnavailable, InventoryError, RateLimited

API_URL = "https://api.runpod.io"
TIMEOUT_S = 15.0
MAX_TRIES = 3  # requests per listing when rate-limited (429)
MAX_WAIT_S = 30.0  # total seconds podstate waits out rate limits before giving up

__all__ = ["ApiUnavailable", "InventoryError", "RateLimited", "Settings", "fetch", "settings"]

LISTING_ENV = "PODSTATE_API_LISTING"


@dataclass(frozen=True)
class Settings:
    """Where and how to ask the API, read from the environment by ``settings()``."""

    key: str
    base_url: str
    timeout: float
    include_cluster: bool
    ssh_key: str | None

    def __repr__(self) -> str:  # never show the key, even in a debugger or a traceback
        return f"Settings(base_url={self.base_url!r}, timeout={self.timeout!r}, ...)"


def settings(env: Mapping[str, str] | None = None) -> Settings:
    """Return the API settings from the environment; InventoryError names a bad variable."""
    env = os.environ if env is None else env
    key, base_url, timeout = api_http.key_url_timeout(
        env, "RUNPOD", API_URL, TIMEOUT_S, "RUNPOD_API_KEY is not set: set it to a RunPod API key"
    )
    cluster = (env.get("PODSTATE_CLUSTER_PODS") or "0").strip().lower()
    if cluster not in ("0", "1", "true", "false", "yes", "no"):
        raise InventoryError(f"PODSTATE_CLUSTER_PODS: expected 1 or 0, got {cluster!r}")
    ssh_key = api_http.ssh_key_file(env)
    return Settings(key, base_url, timeout, cluster in ("1", "true", "yes"), ssh_key)


def api(config: Settings) -> api_http.Api:
    """Return the API as ``api_http`` reaches it: every request to RunPod's API (the
    listing, the logs of ``keylog``, the stops of ``actions``) goes through it."""
    return api_http.Api(
        "the RunPod API",
        config.base_url,
        config.key,
        config.timeout,
        "RUNPOD_API_KEY",
        "RUNPOD_API_TIMEOUT",
    )


def fetch(
    config: Settings,
    *,
    max_tries: int = MAX_TRIES,
    max_wait: float = MAX_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Any]:
    """Return the raw ``pods`` list of ``GET /v2/pods``; InventoryError for anything else.

    Rate limits (429) are waited out as ``Retry-After`` or ``RateLimit`` say, for at most
    ``max_tries`` requests and ``max_wait`` seconds in all; a longer wait fails at once
    rather than hanging a CI job.
    """
    url = f"{config.base_url}/v2/pods"
    if config.include_cluster:
        url += "?includeClusterPods=true"
    director = api_http.opener(url)
    waited = 0.0
    for attempt in range(1, max_tries + 1):
        status, headers, body = api_http.get(director, url, api(config))
        if status == 429:
            wait = retry_wait(headers)
            if attempt < max_tries and waited + wait <= max_wait:
                sleep(wait)
                waited += wait
                continue
            raise RateLimited(
                f"RunPod API rate limit: still refused after {attempt} "
                f"{'try' if attempt == 1 else 'tries'} (it asks to wait {wait:g} s more); "
                "try again later",
                wait,
            )
        if status == 200:
            return _pods_list(body, headers, config)
        message = _status_message(status, headers, body, config)
        if status >= 500:
            raise ApiUnavailable(message, api_http.retry_after(headers))
        raise InventoryError(message)
    raise AssertionError("unreachable")  # pragma: no cover


def retry_wait(headers: Message) -> float:
    """Return the seconds a 429 asks to wait: Retry-After, else RateLimit's spent windows."""
    retry_after = api_http.retry_after(headers)
    if retry_after is not None:
        return retry_after
    waits = []
    for member in (headers.get("RateLimit") or "").split(","):
        remaining = re.search(r";\s*r=(\d+)", member)
        reset = re.search(r";\s*t=(\d+)", member)
        if remaining and reset and int(remaining.group(1)) == 0:
            waits.append(float(reset.group(1)))
    return max(waits) if waits else 1.0


def _status_message(status: int, headers: Message, body: bytes, config: Settings) -> str:
    """Return the one-line error for an HTTP status other than 200 and 429."""
    detail = problem_detail(body, config)
    said = api_http.status_line(status, detail)
    if status == 401:
        return (
            f"the RunPod API refused RUNPOD_API_KEY ({said}): check the key, or create one "
            "in the RunPod console (Settings, API Keys)"
        )
    if status == 403:
        return f"RUNPOD_API_KEY may not list pods ({said}): give the key read access to pods"
    if 300 <= status < 400:
        return api_http.redirect_message(api(config), status, headers, "RUNPOD_API_URL")
    return f"the RunPod API at {config.base_url} answered {said}"


def problem_detail(body: bytes, config: Settings) -> str:
    """Return the ``detail`` of an RFC 9457 problem body, on one short line ('' if none)."""
    try:
        problem = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ""
    if not isinstance(problem, dict) or not isinstance(problem.get("detail"), str):
        return ""
    text = " ".join(api(config).scrub(problem["detail"]).split())
    return text if len(text) <= 200 else text[:197] + "..."


def read_listing(path: Path) -> list[Any]:
    """Return the raw ``pods`` list in the file ``path`` (``{"pods": [...]}``, as
    ``podstate watch`` writes the listing it made); InventoryError naming ``LISTING_ENV``
    when it cannot be read. It exists so that the runs a watch starts read the pods it
    listed, instead of asking the API again within one pass."""
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        why = e.strerror if isinstance(e, OSError) else "not JSON"
        raise InventoryError(
            f"{LISTING_ENV}: cannot read a pod listing from {path}: {why}"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("pods"), list):
        raise InventoryError(f"{LISTING_ENV}: {path} holds no 'pods' list")
    return doc["pods"]


def _pods_list(body: bytes, headers: Message, config: Settings) -> list[Any]:
    """Return the ``pods`` array of a 200 answer; InventoryError when it is not one."""
    answered = f"the RunPod API at {config.base_url} answered"
    doc = api_http.json_body(body, headers, answered, "RUNPOD_API_URL")
    if not isinstance(doc, dict) or not isinstance(doc.get("pods"), list):
        got = "no 'pods' list" if isinstance(doc, dict) else kind_of(doc)
        raise InventoryError(
            f"unexpected RunPod API response: expected an object with a 'pods' list, got {got}"
        )
    return doc["pods"]


def stop(pod_id: str) -> Stopped:
    """Stop a RunPod pod: ``POST /v2/pods/{id}/action`` with ``{"action": "stop"}`` (200:
    stopped; 409: not in a status that may stop; 403, 429, 5xx: refused for now)."""
    try:
        config = settings()
        client = api(config)
        url = f"{config.base_url}/v2/pods/{urllib.parse.quote(pod_id, safe='')}/action"
        request = api_http.authorized(url, client, method="POST", data={"action": "stop"})
        status, _, body = api_http.send(api_http.opener(url), request, client)
    except InventoryError as e:
        return Stopped(False, str(e))
    if 200 <= status < 300:
        return Stopped(True)
    said = f"RunPod answered {status}" + (
        f": {problem}" if (problem := problem_detail(body, config)) else ""
    )
    if status == 409:
        return Stopped(False, f"{said} (its status allows no stop now)")
    return Stopped(False, said)
