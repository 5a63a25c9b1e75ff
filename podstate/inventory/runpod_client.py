"""The RunPod API client: ``GET /v2/pods``, the one API client (``api_client.Client``) with
RunPod's words and addresses.

Rate limits (429) are waited out as ``Retry-After`` or ``RateLimit`` say, within a bound;
what may pass (a 429 past that bound, a 5xx, no answer) is an ``ApiUnavailable``, with the
wait the API asked for, so ``podstate watch`` can back off.

Environment (``api_client`` has the variables every provider's client reads):

``RUNPOD_API_KEY``        the API key (required for this source)
``RUNPOD_API_URL``        base URL, default https://api.runpod.io (plain http: localhost only)
``RUNPOD_API_TIMEOUT``    seconds to wait for the API, default 15
``PODSTATE_CLUSTER_PODS`` 1: manage cluster member pods too (``includeClusterPods=true``)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

from podstate.inventory import api_http, runpod_pods
from podstate.inventory.api_client import Client, tries
from podstate.inventory.api_http import ApiUnavailable, InventoryError, RateLimited
from podstate.providers.runpod import RUNPOD

__all__ = ["ApiUnavailable", "InventoryError", "RateLimited", "RunPodClient", "settings", "stop"]


@dataclass(frozen=True)
class RunPodClient(Client):
    """RunPod's API as the environment sets it; ``include_cluster``: cluster member pods
    are managed too (``PODSTATE_CLUSTER_PODS``)."""

    include_cluster: bool = False

    PROVIDER = RUNPOD
    CHECK = runpod_pods.CHECK
    NAME = "RunPod"
    PREFIX = "RUNPOD"
    URL = "https://api.runpod.io"
    MISSING = "RUNPOD_API_KEY is not set: set it to a RunPod API key"
    CONSOLE = "Settings, API Keys"
    LISTS = "pods"
    FORBIDDEN = ": give the key read access to pods"
    DETAIL = ("detail",)  # an RFC 9457 problem's
    STOP = ("POST", "/v2/pods/{id}/action", {"action": "stop"})
    REFUSED = {409: " (its status allows no stop now)"}

    @classmethod
    def options(cls, env: Mapping[str, str]) -> dict[str, Any]:
        """Return ``include_cluster`` from ``PODSTATE_CLUSTER_PODS``."""
        cluster = (env.get("PODSTATE_CLUSTER_PODS") or "0").strip().lower()
        if cluster not in ("0", "1", "true", "false", "yes", "no"):
            raise InventoryError(f"PODSTATE_CLUSTER_PODS: expected 1 or 0, got {cluster!r}")
        return {"include_cluster": cluster in ("1", "true", "yes")}

    def parse(self, raw: list[Any]) -> tuple[list[Any], list[Any]]:
        """Return the pods podstate can manage and the ones it skips (``runpod_pods``)."""
        return runpod_pods.parse(raw, self.include_cluster)

    def page_url(self, token: str | None) -> str:
        """Return the listing's URL: RunPod lists every pod in one answer."""
        cluster = "?includeClusterPods=true" if self.include_cluster else ""
        return f"{self.base_url}/v2/pods{cluster}"

    def wait(self, headers: Message, attempt: int) -> float:
        """Return the seconds a 429 asks to wait (``retry_wait``)."""
        return retry_wait(headers)

    def rate_limited(self, page: int, attempt: int, wait: float, waited: float) -> RateLimited:
        """Return the error for a listing still refused, with the wait RunPod asked for."""
        return RateLimited(
            f"RunPod API rate limit: still refused after {tries(attempt)} (it asks to wait "
            f"{wait:g} s more); try again later",
            wait,
        )


settings = RunPodClient.settings
stop = RunPodClient.stop


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
