"""The HTTP every provider's API client (``api_client``) sends: the base URL's check, one
request that never follows a redirect nor shows the key, and the waits a rate limit asks for.

Only the standard library talks HTTP. The key goes nowhere but the ``Authorization`` header
of requests to the configured API: redirects are refused, and every message that could echo
it is scrubbed (``scrub``).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from email.utils import parsedate_to_datetime
from typing import Any

from podstate.desired.errors import SpecError

MAX_BODY = 32 << 20  # bytes of response podstate reads at most


class InventoryError(SpecError):
    """The live inventory could not be built: one line that says what to fix."""


class ApiUnavailable(InventoryError):
    """The API cannot list the pods now and may later: a 5xx, no answer, a rate limit.

    ``retry_after``: the seconds the API asked to wait (``Retry-After``), None when it said
    nothing; ``kind``: the word ``podstate watch`` reports it as.
    """

    kind = "api-unavailable"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimited(ApiUnavailable):
    """The API refused the listing for its rate limit (429), after the waits allowed."""

    kind = "rate-limited"


@dataclass(frozen=True)
class Api:
    """One provider's API as a client reaches it: what to call it in messages (``name``,
    "the RunPod API"), its base URL, the key, the seconds to wait for an answer and the
    variables that set them (for the messages)."""

    name: str
    base_url: str
    key: str
    timeout: float
    key_variable: str
    timeout_variable: str

    def __repr__(self) -> str:  # never show the key, even in a debugger or a traceback
        return f"Api({self.name!r}, {self.base_url!r})"

    def scrub(self, text: str) -> str:
        """Return ``text`` with the API key blanked out, whatever sent it back."""
        return text.replace(self.key, f"<{self.key_variable}>")


def json_body(body: bytes, headers: Message, answered: str, variable: str) -> Any:
    """Return a 200 answer's JSON; InventoryError saying that ``answered`` (who answered
    what) with something that is not JSON, its content type and size, and asking whether
    ``variable`` (the API's URL) is right."""
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        kind = headers.get("Content-Type") or "no content type"
        raise InventoryError(
            f"{answered} with something that is not JSON ({kind}, {len(body)} bytes); "
            f"is {variable} right?"
        ) from None


def check_url(url: str, variable: str, example: str) -> str:
    """Return the base URL without a trailing slash; InventoryError naming ``variable`` when it
    is unusable.

    Plain http is accepted for loopback addresses only (tests, local proxies), so the key
    never crosses a network unencrypted.
    """
    parts = _split(url)
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.query
        or parts.fragment
    ):
        raise InventoryError(
            f"{variable}: expected a base URL like {example} (no user name, query or fragment)"
        )
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise InventoryError(
            f"{variable}: plain http is allowed for localhost only (the API key would "
            "cross the network unencrypted); use https"
        )
    return url.rstrip("/")


def _split(url: str) -> urllib.parse.SplitResult | None:
    """Return the parts of ``url``; None when its port is not a number."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # ValueError for a port that is not a number
    except ValueError:
        return None
    return parts


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect, so the key is never sent to another address."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> None:
        """Return None, so urllib raises HTTPError for the 3xx instead of following it."""
        return None


def opener(url: str) -> urllib.request.OpenerDirector:
    """Return the opener for requests to ``url``: no redirects, and no proxy for plain http
    (a loopback address)."""
    proxies = urllib.request.ProxyHandler({} if url.startswith("http://") else None)
    return urllib.request.build_opener(_NoRedirect, proxies)


def authorized(
    url: str, api: Api, accept: str = "application/json", method: str = "GET", data: Any = None
) -> urllib.request.Request:
    """Return a request of ``url`` carrying the key, in a header no redirect would pass on
    (``data``: a JSON body, sent as such)."""
    headers = {"Accept": accept, "User-Agent": "podstate"}
    body = None
    if data is not None:
        body = json.dumps(data).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    request.add_unredirected_header("Authorization", f"Bearer {api.key}")
    return request


def get(director: urllib.request.OpenerDirector, url: str, api: Api) -> tuple[int, Message, bytes]:
    """Return (status, headers, body) of one GET of ``url`` with the key (``send``)."""
    return send(director, authorized(url, api), api)


def send(
    director: urllib.request.OpenerDirector, request: urllib.request.Request, api: Api
) -> tuple[int, Message, bytes]:
    """Return (status, headers, body) of one request; ApiUnavailable when no answer came,
    InventoryError for an answer too large to be a listing."""
    where = f"{api.name} at {api.base_url}"
    try:
        with director.open(request, timeout=api.timeout) as response:
            body = response.read(MAX_BODY + 1)
            if len(body) > MAX_BODY:
                raise InventoryError(f"{where} sent more than {MAX_BODY >> 20} MiB; not a pod list")
            return response.status, response.headers, body
    except urllib.error.HTTPError as e:
        try:
            body = e.read(64 << 10)
        except (OSError, http.client.HTTPException):
            body = b""
        return e.code, e.headers, body
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            raise ApiUnavailable(_timeout_message(where, api)) from None
        reason = e.reason.strerror if isinstance(e.reason, OSError) else None
        detail = api.scrub(str(reason or e.reason))
        raise ApiUnavailable(f"cannot reach {where}: {detail}") from None
    except TimeoutError:
        raise ApiUnavailable(_timeout_message(where, api)) from None
    except (OSError, http.client.HTTPException, ValueError) as e:
        detail = api.scrub(str(e) or type(e).__name__)
        raise ApiUnavailable(f"cannot reach {where}: {detail}") from None


def _timeout_message(where: str, api: Api) -> str:
    return f"no answer from {where} within {api.timeout:g} s ({api.timeout_variable})"


def retry_after(headers: Message) -> float | None:
    """Return the seconds ``Retry-After`` asks to wait (seconds, or an HTTP date); None
    when there is no such header or it is neither."""
    value = (headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def status_line(status: int, detail: str) -> str:
    """Return an HTTP status as messages show it: ``401 Unauthorized: detail``."""
    reason = http.client.responses.get(status, "")
    return f"{status} {reason}".strip() + (f": {detail}" if detail else "")


def redirect_message(api: Api, status: int, headers: Message, variable: str) -> str:
    """Return the one-line error for a redirect, which podstate never follows."""
    location = urllib.parse.urlsplit(headers.get("Location") or "").netloc or "elsewhere"
    return (
        f"{api.name} at {api.base_url} redirects ({status}) to {location}; "
        f"podstate sends the API key to {variable} only: set it to the final address"
    )
