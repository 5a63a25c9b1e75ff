"""The one API client every provider's is: its settings, read from the environment; the
listing, every page of it, with rate limits waited out within a bound and every other
answer one line; the stop request; the listing handed on by ``podstate watch``.

A provider's client (``runpod_client``, ``vast_client``) is a small subclass: its API's
words and addresses as class attributes, and a method where its API behaves otherwise (how
long a 429 asks to wait, how its pages go on, what its stop answers). The HTTP is
``api_http``'s: the key goes nowhere but the ``Authorization`` header of requests to the
configured API, and no message, log line, ``repr`` or host data ever contains it.

Environment, for a provider whose variables begin with ``PREFIX`` (``RUNPOD``, ``VAST``):

``PREFIX_API_KEY``        the API key (required for this source)
``PREFIX_API_URL``        base URL (plain http: localhost only)
``PREFIX_API_TIMEOUT``    seconds to wait for each answer, default 15
``PODSTATE_SSH_KEY``      private key file for every pod (host data ``ssh_key``); unset:
                          pyinfra's defaults (SSH agent, ~/.ssh/id_*)
``PODSTATE_API_LISTING``  set by ``podstate watch`` for the runs it starts: a file holding
                          the listing it made this pass, read instead of asking the API again
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any, ClassVar, Self

from podstate.desired.errors import kind_of
from podstate.inventory import api_http
from podstate.inventory.actions import Stopped
from podstate.inventory.api_http import ApiUnavailable, InventoryError, RateLimited
from podstate.inventory.naming import Listing
from podstate.inventory.records import Checker
from podstate.providers.record import Provider

LISTING_ENV = "PODSTATE_API_LISTING"


@dataclass(frozen=True)
class Client:
    """One provider's API as the environment sets it (``settings``): the key (never in a
    ``repr``), the base URL, the seconds to wait for an answer, the private key file for
    every pod it lists."""

    key: str = field(repr=False)
    base_url: str
    timeout: float
    ssh_key: str | None

    PROVIDER: ClassVar[Provider]  # its record: its name, its listing's key when handed on
    CHECK: ClassVar[Checker]  # the checker of its records
    NAME: ClassVar[str]  # what its messages call the provider: "RunPod"
    PREFIX: ClassVar[str]  # its variables' prefix: "RUNPOD"
    URL: ClassVar[str]  # its base URL when PREFIX_API_URL is unset
    MISSING: ClassVar[str]  # what to say when there is no key
    CONSOLE: ClassVar[str]  # where in its console a key is made
    LISTS: ClassVar[str]  # what its listing lists, and that list's key in an answer
    FORBIDDEN: ClassVar[str] = ""  # what to do when the key may not list them
    DETAIL: ClassVar[tuple[str, ...]]  # the keys of an error body that say what went wrong
    STOP: ClassVar[tuple[str, str, dict[str, str]]]  # a stop's method, path ({id}) and body
    REFUSED: ClassVar[dict[int, str]] = {}  # what a stop's refusal means, by status
    PAGE: ClassVar[int | None] = None  # the most records a page holds; None: one page
    TIMEOUT_S: ClassVar[float] = 15.0
    MAX_TRIES: ClassVar[int] = 3  # requests per page when rate-limited (429)
    MAX_WAIT_S: ClassVar[float] = 30.0  # seconds a listing waits out rate limits at most
    MAX_PAGES: ClassVar[int] = 400  # past it, a listing that never ends is refused

    @classmethod
    def settings(cls, env: Mapping[str, str] | None = None) -> Self:
        """Return the API settings from the environment (``os.environ`` when ``env`` is
        None); InventoryError names a bad variable."""
        env = os.environ if env is None else env
        key = (env.get(f"{cls.PREFIX}_API_KEY") or "").strip()
        if not key:
            raise InventoryError(cls.MISSING)
        if not re.fullmatch(r"[\x21-\x7e]+", key):  # Python's own error would quote the key
            raise InventoryError(
                f"{cls.PREFIX}_API_KEY contains spaces, line breaks or non-ASCII characters: "
                "set it to the key alone"
            )
        url = (env.get(f"{cls.PREFIX}_API_URL") or cls.URL).strip()
        base_url = api_http.check_url(url, f"{cls.PREFIX}_API_URL", cls.URL)
        raw = (env.get(f"{cls.PREFIX}_API_TIMEOUT") or "").strip()
        try:
            seconds = float(raw) if raw else cls.TIMEOUT_S
        except ValueError:
            seconds = -1.0
        if not 0 < seconds <= 600:
            raise InventoryError(
                f"{cls.PREFIX}_API_TIMEOUT: expected seconds (0 to 600), got {raw!r}"
            )
        options = cls.options(env)
        return cls(key, base_url, seconds, ssh_key_file(env), **options)

    @classmethod
    def options(cls, env: Mapping[str, str]) -> dict[str, Any]:
        """Return the provider's own settings from the environment (none here)."""
        return {}

    def api(self) -> api_http.Api:
        """Return the API as ``api_http`` reaches it: every request to it goes through it."""
        name = f"the {self.NAME} API"
        var = self.PREFIX
        return api_http.Api(
            name, self.base_url, self.key, self.timeout, f"{var}_API_KEY", f"{var}_API_TIMEOUT"
        )

    @classmethod
    def listed(cls) -> Listing:
        """Return the provider's listing, parsed, from the API the environment names, or
        from the listing ``podstate watch`` handed on (``records``). The records handed on
        keep only the fields podstate reads (``Checker.kept``)."""
        config = cls.settings()
        raw, notes = config.records()
        pods, skipped = config.parse(raw)
        return Listing(cls.PROVIDER.name, pods, skipped, cls.CHECK.kept(raw), config.ssh_key, notes)

    def parse(self, raw: list[Any]) -> tuple[list[Any], list[Any]]:
        """Return the records podstate can manage and the ones it skips (its checker's)."""
        raise NotImplementedError

    def records(self) -> tuple[list[Any], list[str]]:
        """Return the raw records and what the listing met on the way: with
        ``PODSTATE_API_LISTING`` set (by ``podstate watch``, for the runs it starts), that
        file's records of this provider, and the API is not asked within one pass."""
        handed = os.environ.get(LISTING_ENV)
        if not handed:
            return self.fetch()
        path, key = Path(handed), self.PROVIDER.listing_key
        try:
            doc = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
            why = e.strerror if isinstance(e, OSError) else "not JSON"
            raise InventoryError(
                f"{LISTING_ENV}: cannot read a pod listing from {path}: {why}"
            ) from None
        if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
            raise InventoryError(f"{LISTING_ENV}: {path} holds no '{key}' list")
        return doc[key], []

    def fetch(
        self,
        *,
        max_tries: int | None = None,
        max_wait: float | None = None,
        max_pages: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> tuple[list[Any], list[str]]:
        """Return the records of every page of the listing and what it met on the way
        (``notes``); InventoryError for anything else: a refused key, a page that is not
        one, a page that repeats an earlier page's token (a listing that would never end),
        more than ``max_pages`` pages.

        A 429 is waited out as long as ``wait`` says, for at most ``max_tries`` requests a
        page and ``max_wait`` seconds in all; a longer wait fails at once (RateLimited)
        rather than hanging a CI job.
        """
        max_tries = self.MAX_TRIES if max_tries is None else max_tries
        max_wait = self.MAX_WAIT_S if max_wait is None else max_wait
        max_pages = self.MAX_PAGES if max_pages is None else max_pages
        api = self.api()
        director = api_http.opener(self.base_url)
        records: list[Any] = []
        tokens: set[str] = set()
        token: str | None = None
        waited, limited = 0.0, 0
        for page in range(1, max_pages + 1):
            url = self.page_url(token)
            for attempt in range(1, max_tries + 1):
                status, headers, body = api_http.get(director, url, api)
                if status != 429:
                    break
                limited += 1
                wait = self.wait(headers, attempt)
                if attempt == max_tries or waited + wait > max_wait:
                    raise self.rate_limited(page, attempt, wait, waited)
                sleep(wait)
                waited += wait
            if status != 200:
                raise self.failure(status, headers, body, page)
            found, token = self.page(body, headers, page)
            records += found
            if token is None:
                return records, self.notes(limited, waited)
            if token in tokens:
                raise self.unexpected(
                    f"page {page} repeats the next_token of an earlier page (the listing "
                    "would never end)"
                )
            tokens.add(token)
        raise InventoryError(
            f"the {self.NAME} API lists more than {max_pages} pages of {self.LISTS}; not a "
            "listing podstate can finish"
        )

    def page_url(self, token: str | None) -> str:
        """Return the URL of the listing's page after ``token`` (None: the first)."""
        raise NotImplementedError

    def wait(self, headers: Message, attempt: int) -> float:
        """Return the seconds to wait after the ``attempt``-th 429 of a page: 1, 2, 4, ..."""
        return float(2 ** (attempt - 1))

    def rate_limited(self, page: int, attempt: int, wait: float, waited: float) -> RateLimited:
        """Return the error for a page still refused (429) after ``attempt`` requests."""
        raise NotImplementedError

    def notes(self, limited: int, waited: float) -> list[str]:
        """Return what a listing that met ``limited`` 429s, and waited ``waited`` seconds,
        says of them in the reports (nothing here)."""
        return []

    def unexpected(self, problem: str) -> InventoryError:
        """Return the error for an answer that is not what the API documents."""
        return InventoryError(f"unexpected {self.NAME} API response: {problem}")

    def answered(self, page: int) -> str:
        """Return who answered what, as messages of an answer say it."""
        paged = f" page {page}" if self.PAGE else ""
        return f"the {self.NAME} API at {self.base_url} answered{paged}"

    def answer(self, body: bytes, headers: Message, page: int) -> dict[str, Any]:
        """Return a 200 answer's JSON object, which holds the list of records (``LISTS``);
        InventoryError when it is not one."""
        doc = api_http.json_body(body, headers, self.answered(page), f"{self.PREFIX}_API_URL")
        at, key = f"page {page}: " if self.PAGE else "", self.LISTS
        if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
            got = f"no '{key}' list" if isinstance(doc, dict) else kind_of(doc)
            an = "an" if key[0] in "aeiou" else "a"
            raise self.unexpected(f"{at}expected an object with {an} '{key}' list, got {got}")
        return doc

    def page(self, body: bytes, headers: Message, page: int) -> tuple[list[Any], str | None]:
        """Return a 200 page's records and the token of the next page (None: the last)."""
        return self.answer(body, headers, page)[self.LISTS], None

    def failure(self, status: int, headers: Message, body: bytes, page: int) -> InventoryError:
        """Return the one-line error for an answer other than 200 and 429: ApiUnavailable,
        with the wait the API asked for, where a later listing may pass (a 5xx)."""
        said = api_http.status_line(status, self.detail(body))
        key = f"{self.PREFIX}_API_KEY"
        if status == 401:
            return InventoryError(
                f"the {self.NAME} API refused {key} ({said}): check the key, or create one "
                f"in the {self.NAME} console ({self.CONSOLE})"
            )
        if status == 403:
            return InventoryError(f"{key} may not list {self.LISTS} ({said}){self.FORBIDDEN}")
        if 300 <= status < 400:
            api, variable = self.api(), f"{self.PREFIX}_API_URL"
            return InventoryError(api_http.redirect_message(api, status, headers, variable))
        if status >= 500:
            where = f"the {self.NAME} API at {self.base_url}"
            return ApiUnavailable(f"{where} answered {said}", api_http.retry_after(headers))
        return InventoryError(f"{self.answered(page)}{':' if self.PAGE else ''} {said}")

    def detail(self, body: bytes) -> str:
        """Return what an error body says (its first string of ``DETAIL``), scrubbed of the
        key, on one short line ('' if nothing)."""
        try:
            doc = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return ""
        if not isinstance(doc, dict):
            return ""
        said = next((doc[k] for k in self.DETAIL if isinstance(doc.get(k), str)), "")
        text = " ".join(self.api().scrub(said).split())
        return text if len(text) <= 200 else text[:197] + "..."

    @classmethod
    def stop(cls, pod_id: str) -> Stopped:
        """Ask the API to stop the pod ``pod_id`` (``STOP``); return what came of it, with
        the provider's status and what it said when it refused (never raises)."""
        try:
            config = cls.settings()
            api = config.api()
            method, path, data = cls.STOP
            url = config.base_url + path.format(id=urllib.parse.quote(pod_id, safe=""))
            request = api_http.authorized(url, api, method=method, data=data)
            status, _, body = api_http.send(api_http.opener(url), request, api)
        except InventoryError as e:
            return Stopped(False, str(e))
        if config.stopped(status, body):
            return Stopped(True)
        said = config.detail(body)
        refused = f"{cls.NAME} answered {status}" + (f": {said}" if said else "")
        return Stopped(False, refused + cls.REFUSED.get(status, ""))

    def stopped(self, status: int, body: bytes) -> bool:
        """Return whether a stop's answer says the pod stops (any 2xx here)."""
        return 200 <= status < 300


def ssh_key_file(env: Mapping[str, str]) -> str | None:
    """Return the private key file for every pod a provider's API lists
    (``PODSTATE_SSH_KEY``, expanded), None when unset (pyinfra's defaults: the SSH agent,
    ~/.ssh/id_*); InventoryError when no file is there, before any pod is contacted."""
    ssh_key = (env.get("PODSTATE_SSH_KEY") or "").strip() or None
    if ssh_key:
        ssh_key = str(Path(ssh_key).expanduser())
        if not Path(ssh_key).is_file():
            raise InventoryError(f"PODSTATE_SSH_KEY: no private key file at {ssh_key}")
    return ssh_key


def tries(count: int, one: str = "try", many: str = "tries") -> str:
    """Return ``count`` with its word: ``1 try``, ``3 tries``."""
    return f"{count} {one if count == 1 else many}"
