"""The Vast.ai API client: every page of ``GET /api/v1/instances``, the one API client
(``api_client.Client``) with Vast's words, addresses and pages.

Vast pages its listing (at most 25 instances a page, ``next_token`` then ``after_token``) and
answers 429 when requests come too often, without ``Retry-After``: podstate backs off on its
own (1, 2, 4, ... seconds), for at most ``MAX_TRIES`` requests a page and ``MAX_WAIT_S``
seconds a listing, and says so (``Listing.notes``).

Environment (``api_client`` has the variables every provider's client reads):

``VAST_API_KEY``      the API key (required for this source; Vast's CLI keeps it in
                      ``~/.config/vastai/vast_api_key``)
``VAST_API_URL``      base URL, default https://console.vast.ai (plain http: localhost only)
``VAST_API_TIMEOUT``  seconds to wait for each page, default 15
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from email.message import Message
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory import vast_instances
from podstate.inventory.api_client import Client, tries
from podstate.inventory.api_http import RateLimited
from podstate.providers.vast import VAST

PATH = "/api/v1/instances"
PER_PAGE = 25  # Vast's most per page


@dataclass(frozen=True)
class VastClient(Client):
    """Vast's API as the environment sets it."""

    PROVIDER = VAST
    CHECK = vast_instances.CHECK
    NAME = "Vast"
    PREFIX = "VAST"
    URL = "https://console.vast.ai"
    MISSING = (
        "VAST_API_KEY is not set: set it to a Vast API key (Vast's CLI keeps one in "
        "~/.config/vastai/vast_api_key)"
    )
    CONSOLE = "Account, Keys"
    LISTS = "instances"
    DETAIL = ("msg", "detail", "error")
    # Vast keeps its container disk; its processes and /dev/shm go. 400, 404: not this
    # instance; 401, 429, 5xx: refused for now.
    STOP = ("PUT", "/api/v0/instances/{id}", {"state": "stopped"})
    PAGE = PER_PAGE
    MAX_TRIES = 5

    def parse(self, raw: list[Any]) -> tuple[list[Any], list[Any]]:
        """Return the instances podstate can manage and the ones it skips
        (``vast_instances``)."""
        return vast_instances.parse(raw)

    def page_url(self, token: str | None) -> str:
        """Return the URL of the page after ``token`` (``after_token``)."""
        query = {"limit": str(PER_PAGE), **({"after_token": token} if token else {})}
        return f"{self.base_url}{PATH}?{urllib.parse.urlencode(query)}"

    def page(self, body: bytes, headers: Message, page: int) -> tuple[list[Any], str | None]:
        """Return a 200 page's ``instances`` and ``next_token``; InventoryError otherwise."""
        doc = self.answer(body, headers, page)
        token = doc.get("next_token")
        if token is not None and (not isinstance(token, str) or not token):
            raise self.unexpected(
                f"page {page}: next_token: expected a string or null, got {kind_of(token)}"
            )
        if len(doc["instances"]) > PER_PAGE:
            raise self.unexpected(
                f"page {page} holds {len(doc['instances'])} instances (Vast's pages hold "
                f"{PER_PAGE} at most)"
            )
        return doc["instances"], token

    def rate_limited(self, page: int, attempt: int, wait: float, waited: float) -> RateLimited:
        """Return the error for a page still refused after the backoff allowed."""
        return RateLimited(
            f"Vast API rate limit: page {page} still refused (429, which Vast sends without "
            f"Retry-After) after {tries(attempt)} and {waited:g} s of waiting; try again later"
        )

    def notes(self, limited: int, waited: float) -> list[str]:
        """Return the note of a listing that waited out Vast's rate limit (none without)."""
        if not limited:
            return []
        return [
            f"the Vast API's rate limit was hit {tries(limited, 'time', 'times')} (429, no "
            f"Retry-After): podstate waited {waited:g} s in all"
        ]

    def stopped(self, status: int, body: bytes) -> bool:
        """Return whether a stop's answer is 200 and says ``"success": true``."""
        try:
            return status == 200 and json.loads(body.decode("utf-8")).get("success") is True
        except (UnicodeDecodeError, ValueError, AttributeError, RecursionError):
            return False


settings = VastClient.settings
stop = VastClient.stop
