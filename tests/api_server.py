"""A provider's API for tests: RunPod's or Vast's, on 127.0.0.1, answering what a test sets.

It is the sandbox's own API server (``podstate.sandbox.api.Handler``: the keys checked, the
paths, the problem answers, Vast's pages and tokens), in a thread of the test process, with
the listing a test sets (``serve``) in place of the sandbox's pods. Every document served is
first validated against the provider's OpenAPI document (copies in tests/fixtures/), so
the fixtures cannot drift from the real API. On top of it, as a test needs:

- ``requests``: every request, in order (``method``, ``path``, ``query``, ``headers``,
  ``body``): what was listed, which pod was stopped, with which key;
- ``queue``: raw answers (a fault, a malformed listing, a stop refused) given, one a request
  and before anything else, to requests that carry the key;
- ``log``, ``log_fails``: a RunPod pod's container log, or the failures its log requests get;
- ``delay``: seconds to wait before each answer.

``provider_api("runpod")`` (tests/conftest.py) starts one for a test and closes it after.
"""

from __future__ import annotations

import io
import json
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from podstate.sandbox.api import Handler

FIXTURES = Path(__file__).resolve().parent / "fixtures"
KEYS = {  # distinctive, to search outputs for
    "runpod": "rpa_PODSTATE_TEST_KEY_7f3a9c21e5d84b60",
    "vast": "vastPODSTATEtestKEY0c9e1b2a7d",
}
RUNPOD_SPEC = json.loads((FIXTURES / "runpod" / "runpod-openapi-v2.json").read_text())
VAST_SPEC = yaml.safe_load((FIXTURES / "vast" / "vast-openapi-instances.yaml").read_text())


def runpod_validator(schema_name: str) -> Draft202012Validator:
    """Return a validator of RunPod's schema ``schema_name`` (``ListPodsResponse``...)."""
    registry = Registry().with_resource(
        "urn:runpod-openapi-v2",
        Resource.from_contents(RUNPOD_SPEC, default_specification=DRAFT202012),
    )
    return Draft202012Validator(
        {"$ref": f"urn:runpod-openapi-v2#/components/schemas/{schema_name}"}, registry=registry
    )


_VAST_GET = VAST_SPEC["paths"]["/api/v1/instances"]["get"]["responses"]
SCHEMAS = {
    "runpod": runpod_validator("ListPodsResponse"),  # GET /v2/pods
    "vast": Draft202012Validator(_VAST_GET["200"]["content"]["application/json"]["schema"]),
}
PROBLEM = runpod_validator("ErrorResponse")


def assert_valid(provider: str, doc: dict) -> None:
    """Fail unless ``doc`` is a listing (RunPod) or a page (Vast) the real API could send."""
    errors = sorted(SCHEMAS[provider].iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"{list(errors[0].absolute_path)}: {errors[0].message}"


class ProviderApi:
    """The API of ``provider`` ("runpod" or "vast") on 127.0.0.1 (module doc), wanting
    ``key`` (default: ``KEYS[provider]``); ``url`` is its base URL."""

    def __init__(self, provider: str, key: str | None = None) -> None:
        self.provider = provider
        self.key = key or KEYS[provider]
        self.requests: list[dict[str, Any]] = []
        self.queued: list[tuple[int, dict[str, str], bytes]] = []
        self.listed: list[dict] = []  # RunPod's pods, or Vast's instances
        self.delay = 0.0
        # pod id -> the answers to its log requests, in turn (the last one repeats): (status,
        # headers, body, hold); hold keeps a 200 open, sending keep-alive comments only
        self.logs: dict[str, list[tuple[int, dict[str, str], bytes, bool]]] = {}
        self.closing = threading.Event()
        self._root = tempfile.TemporaryDirectory(prefix="provider-api-")
        keys = {"key": self.key, "vast_key": self.key}
        handler = type("Handler", (_Answers,), {"api": self, "root": Path(self._root.name), **keys})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def serve(self, listing: dict | list[dict]) -> None:
        """List this, once it validates against the provider's spec: RunPod's ``{"pods":
        [...]}``, or Vast's instances (a list, served in pages)."""
        if self.provider == "vast":
            assert_valid("vast", {"success": True, "next_token": None, "instances": listing})
            self.listed = list(listing)
        else:
            assert_valid("runpod", listing)
            self.listed = listing["pods"]

    def queue(self, status: int, body: bytes | dict, headers: dict | None = None) -> None:
        """Answer the next request with this, before anything else."""
        if isinstance(body, dict):
            if status >= 400 and self.provider == "runpod":
                assert not list(PROBLEM.iter_errors(body)), body
            body = json.dumps(body).encode()
        problem = status >= 400 and self.provider == "runpod"
        kind = "application/problem+json" if problem else "application/json"
        self.queued.append((status, {"Content-Type": kind, **(headers or {})}, body))

    def log(self, pod_id: str, lines: list[str], hold: bool = True) -> None:
        """Serve ``lines`` as the pod's container log (SSE events), the stream then held open
        with keep-alive comments (``hold``) as RunPod's is."""
        events = "".join(
            f"id: 2026-06-01T12:00:01Z/{n:012d}\ndata: "
            + json.dumps({"ts": "2026-06-01T12:00:01Z", "source": "container", "line": line})
            + "\n\n"
            for n, line in enumerate(lines)
        )
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        self.logs[pod_id] = [(200, headers, events.encode(), hold)]

    def log_fails(self, pod_id: str, *answers: tuple[int, dict[str, str]]) -> None:
        """Answer the pod's log requests with these statuses (and headers), in turn."""
        self.logs[pod_id] = [
            (status, {"Content-Type": "application/problem+json", **headers}, b"{}", False)
            for status, headers in answers
        ]

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
        self._root.cleanup()

    def __enter__(self) -> ProviderApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Answers(Handler):
    """The sandbox's handler, listing what the test set and giving what it queued first."""

    api: ProviderApi

    def listing(self) -> dict[str, Any]:
        """RunPod's listing: cluster members only with ``includeClusterPods=true``, as RunPod."""
        cluster = parse_qs(urlsplit(self.path).query).get("includeClusterPods") == ["true"]
        return {"pods": [p for p in self.api.listed if cluster or not p.get("cluster")]}

    def vast_instances(self, stopped: int) -> list[dict[str, Any]]:
        return list(self.api.listed)

    def do_GET(self) -> None:  # http.server's API
        if not self._set_by_the_test():
            super().do_GET()

    def do_POST(self) -> None:  # http.server's API
        if not self._set_by_the_test():
            super().do_POST()

    def do_PUT(self) -> None:  # http.server's API
        if not self._set_by_the_test():
            super().do_PUT()

    def _set_by_the_test(self) -> bool:
        """Record the request; answer it as the test set, if it did (a log, a queued answer),
        and return whether it did. A request without the key is the sandbox's to refuse."""
        api, parts = self.api, urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.rfile = io.BytesIO(body)  # for the sandbox's handler, if it answers
        request = {"method": self.command, "path": parts.path, "query": parse_qs(parts.query)}
        api.requests.append({**request, "headers": self.headers, "body": body})
        if api.delay:
            time.sleep(api.delay)
        pod = parts.path.removeprefix("/v2/pods/").removesuffix("/logs")
        if self.headers.get("Authorization") != f"Bearer {api.key}":
            return False
        if parts.path.endswith("/logs") and pod in api.logs:
            turns = api.logs[pod]
            status, headers, body, hold = turns.pop(0) if len(turns) > 1 else turns[0]
        elif api.queued:
            (status, headers, body), hold = api.queued.pop(0), False
        else:
            return False
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if not hold:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            while hold and not api.closing.wait(0.05):
                self.wfile.write(b": keep-alive\n\n")
                self.wfile.flush()
        except OSError:
            pass  # the client gave up (a timeout test)
        return True

    def log_message(self, *args: object) -> None:
        pass
