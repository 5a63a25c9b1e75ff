"""The RunPod API that the restart benchmark's watch lists: the sandbox API's documents, their
SSH ports those of the latency proxy, checked against RunPod's OpenAPI document.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.common.steps import ROOT
from podstate.sandbox.api import list_pods

SPEC = ROOT / "tests" / "fixtures" / "runpod" / "runpod-openapi-v2.json"


def proxied_document(doc: dict[str, Any], ports: dict[int, int]) -> dict[str, Any]:
    """Return a ``GET /v2/pods`` answer with every pod's SSH port replaced by the proxy's
    (``ports``: sandbox port to proxy port), so that podstate reaches the pods through it."""
    pods = []
    for pod in doc["pods"]:
        pod = json.loads(json.dumps(pod))
        direct = (pod.get("ssh") or {}).get("direct")
        if direct:
            direct["port"] = ports[direct["port"]]
            direct["command"] = f"ssh root@{direct['host']} -p {direct['port']}"
        for mapping in (pod.get("runtime") or {}).get("ports") or []:
            mapping["public"] = ports.get(mapping["public"], mapping["public"])
        pods.append(pod)
    return {"pods": pods}


def spec_errors(doc: dict[str, Any]) -> list[str]:
    """Return why ``doc`` is not a ``ListPodsResponse`` of RunPod's OpenAPI document (none:
    the real API could send it), each as ``path: message``."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    spec = json.loads(SPEC.read_text())
    registry = Registry().with_resource(
        "urn:runpod-openapi-v2", Resource.from_contents(spec, default_specification=DRAFT202012)
    )
    validator = Draft202012Validator(
        {"$ref": "urn:runpod-openapi-v2#/components/schemas/ListPodsResponse"}, registry=registry
    )
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]


class Api:
    """``GET /v2/pods`` for the sandbox in ``state``, pods behind the proxy: a thread of this
    process (one request per watch pass). Set ``ports`` before the first request."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.key = "rpa_bench_" + secrets.token_hex(16)
        self.ports: dict[int, int] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's API
                given = (self.headers.get("Authorization") or "").encode()
                if not hmac.compare_digest(given, f"Bearer {api.key}".encode()):
                    status, doc = 401, {"title": "Unauthorized", "status": 401}
                elif self.path.split("?")[0].rstrip("/") != "/v2/pods":
                    status, doc = 404, {"title": "Not Found", "status": 404}
                else:
                    status, doc = 200, api.document()
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def document(self) -> dict[str, Any]:
        """Return the answer to ``GET /v2/pods`` now: the sandbox API's, through the proxy."""
        return proxied_document(list_pods(self.state), self.ports)

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
