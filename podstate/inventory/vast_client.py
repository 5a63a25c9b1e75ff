"""The Vast.ai API client: every page of ``GET /api/v1/instances``, with the settings it
reads from the environment.

The HTTP is ``api_http``'s, shared with RunPod's client: no redirects, the key in the
``Authorization`` header only and never in a message. Vast pages its listing (at most 25
instances a page, ``next_token`` then ``after_token``) and answers 429 when requests come
too often, without ``Retry-After``: podstate backs off on its own (1, 2, 4, ... seconds),
for at most ``MAX_TRIES`` requests a page and ``MAX_WAIT_S`` seconds a listing, and says
so (``Listing.notes``).

Environment:

``VAST_API_KEY``      the API key (required for this source; Vast's CLI keeps it in
                      ``~/.config/vastai/vast_api_key``)
``VAST_API_URL``      base URL, default https://console.vast.ai (plain http: localhost only)
``VAST_API_TIMEOUT``  seconds to wait for each page, default 15
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory import api_http
from podstate.inventory.actions import Stopped
from podstate.inventory.api_http import ApiUnavailable, InventoryError, RateLimited

API_URL = "https://console.vast.ai"
PATH = "/api/v1/instances"
PAGE = 25  # Vast's most per page
TIMEOUT_S = 15.0
MAX_TRIES = 5  # requests per page when rate-limited (429)
MAX_WAIT_S = 30.0  # total seconds a listing waits out rate limits before giving up
MAX_PAGES = 400  # 10,000 instances: past it, a listing that never ends is refused


@dataclass(frozen=True)
class Settings:
    """Where and how to ask Vast's API, read from the environment by ``settings()``."""

    key: str
    base_url: str
    timeout: float

    def __repr__(self) -> str:  # never show the key, even in a debugger or a traceback
        return f"Settings(base_url={self.base_url!r}, timeout={self.timeout!r}, ...)"

    def api(self) -> api_http.Api:
        """Return the API as ``api_http`` reaches it."""
        return api_http.Api(
            "the Vast API", self.base_url, self.key, self.timeout, "VAST_API_KEY",
            "VAST_API_TIMEOUT",
        )  # fmt: skip


@dataclass
class Fetched:
    """Every instance of every page, and what the listing met on the way (notes: a rate
    limit waited out), for the reports."""

    instances: list[Any]
    notes: list[str] = field(default_factory=list)


def settings(env: Mapping[str, str] | None = None) -> Settings:
    """Return the API settings from the environment; InventoryError names a bad variable."""
    key, base_url, timeout = api_http.key_url_timeout(
        os.environ if env is None else env,
        "VAST",
        API_URL,
        TIMEOUT_S,
        "VAST_API_KEY is not set: set it to a Vast API key (Vast's CLI keeps one in "
        "~/.config/vastai/vast_api_key)",
    )
    return Settings(key, base_url, timeout)


def fetch(
    config: Settings,
    *,
    max_tries: int = MAX_TRIES,
    max_wait: float = MAX_WAIT_S,
    max_pages: int = MAX_PAGES,
    sleep: Callable[[float], None] = time.sleep,
) -> Fetched:
    """Return the instances of every page of ``GET /api/v1/instances``; InventoryError for
    anything else: a refused key, a page that is not one, a page that repeats an earlier
    page's token (a listing that would never end), more than ``max_pages`` pages.

    A 429 is retried after 1, 2, 4, ... seconds, at most ``max_tries`` requests a page and
    ``max_wait`` seconds in all; past that, RateLimited.
    """
    api = config.api()
    director = api_http.opener(config.base_url)
    result = Fetched([])
    tokens: set[str] = set()
    token: str | None = None
    waited = 0.0
    limited = 0
    for page in range(1, max_pages + 1):
        query = {"limit": str(PAGE), **({"after_token": token} if token else {})}
        url = f"{config.base_url}{PATH}?{urllib.parse.urlencode(query)}"
        for attempt in range(1, max_tries + 1):
            status, headers, body = api_http.get(director, url, api)
            if status != 429:
                break
            limited += 1
            wait = float(2 ** (attempt - 1))
            if attempt == max_tries or waited + wait > max_wait:
                raise RateLimited(
                    f"Vast API rate limit: page {page} still refused (429, which Vast sends "
                    f"without Retry-After) after {attempt} "
                    f"{'try' if attempt == 1 else 'tries'} and {waited:g} s of waiting; "
                    "try again later"
                )
            sleep(wait)
            waited += wait
        if status != 200:
            raise _failure(status, headers, body, config, page)
        instances, token = _page(body, headers, config, page)
        result.instances += instances
        if token is None:
            if limited:
                result.notes.append(
                    f"the Vast API's rate limit was hit {limited} "
                    f"{'time' if limited == 1 else 'times'} (429, no Retry-After): "
                    f"podstate waited {waited:g} s in all"
                )
            return result
        if token in tokens:
            raise InventoryError(
                f"unexpected Vast API response: page {page} repeats the next_token of an "
                "earlier page (the listing would never end)"
            )
        tokens.add(token)
    raise InventoryError(
        f"the Vast API lists more than {max_pages} pages of instances; not a listing podstate "
        "can finish"
    )


def _page(
    body: bytes, headers: Message, config: Settings, page: int
) -> tuple[list[Any], str | None]:
    """Return a 200 page's ``instances`` and ``next_token``; InventoryError otherwise."""
    answered = f"the Vast API at {config.base_url} answered page {page}"
    doc = api_http.json_body(body, headers, answered, "VAST_API_URL")
    if not isinstance(doc, dict) or not isinstance(doc.get("instances"), list):
        got = "no 'instances' list" if isinstance(doc, dict) else kind_of(doc)
        raise InventoryError(
            f"unexpected Vast API response: page {page}: expected an object with an "
            f"'instances' list, got {got}"
        )
    token = doc.get("next_token")
    if token is not None and (not isinstance(token, str) or not token):
        raise InventoryError(
            f"unexpected Vast API response: page {page}: next_token: expected a string or "
            f"null, got {kind_of(token)}"
        )
    if len(doc["instances"]) > PAGE:
        raise InventoryError(
            f"unexpected Vast API response: page {page} holds {len(doc['instances'])} "
            f"instances (Vast's pages hold {PAGE} at most)"
        )
    return doc["instances"], token


def _failure(
    status: int, headers: Message, body: bytes, config: Settings, page: int
) -> InventoryError:
    """Return the one-line error for an answer other than 200 and 429."""
    api = config.api()
    said = api_http.status_line(status, detail(body, api))
    if status == 401:
        return InventoryError(
            f"the Vast API refused VAST_API_KEY ({said}): check the key, or create one in "
            "the Vast console (Account, Keys)"
        )
    if status == 403:
        return InventoryError(f"VAST_API_KEY may not list instances ({said})")
    if 300 <= status < 400:
        return InventoryError(api_http.redirect_message(api, status, headers, "VAST_API_URL"))
    if status >= 500:
        return ApiUnavailable(f"the Vast API at {config.base_url} answered {said}")
    return InventoryError(f"the Vast API at {config.base_url} answered page {page}: {said}")


def detail(body: bytes, api: api_http.Api) -> str:
    """Return what a Vast error body says (``msg``, else ``detail``, else ``error``), on one
    short line ('' if nothing)."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ""
    if not isinstance(doc, dict):
        return ""
    said = next((doc[k] for k in ("msg", "detail", "error") if isinstance(doc.get(k), str)), "")
    text = " ".join(api.scrub(said).split())
    return text if len(text) <= 200 else text[:197] + "..."


def stop(instance_id: str) -> Stopped:
    """Stop a Vast instance: ``PUT /api/v0/instances/{id}`` with ``{"state": "stopped"}``
    (200 with ``success``: stopped; 400, 404: not this instance; 401, 429, 5xx: refused
    for now). Vast keeps its container disk; its processes and ``/dev/shm`` go."""
    try:
        config = settings()
        api = config.api()
        url = f"{config.base_url}/api/v0/instances/{urllib.parse.quote(instance_id, safe='')}"
        request = api_http.authorized(url, api, method="PUT", data={"state": "stopped"})
        status, _, body = api_http.send(api_http.opener(url), request, api)
    except InventoryError as e:
        return Stopped(False, str(e))
    said = detail(body, api)
    if status == 200 and _succeeded(body):
        return Stopped(True)
    return Stopped(False, f"Vast answered {status}" + (f": {said}" if said else ""))


def _succeeded(body: bytes) -> bool:
    """Return whether a Vast answer says ``"success": true``."""
    try:
        return json.loads(body.decode("utf-8")).get("success") is True
    except (UnicodeDecodeError, ValueError, AttributeError, RecursionError):
        return False
