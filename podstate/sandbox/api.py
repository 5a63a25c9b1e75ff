"""The sandbox's RunPod API: ``GET /v2/pods`` for its pods, answered as RunPod's v2 API does,
and ``GET /v2/pods/{id}/logs`` (``getPodLogs``), each pod's container output (and its Vast
API, ``GET /api/v1/instances`` and ``PUT /api/v0/instances/{id}``: ``vast_api``).

A ``ThreadingHTTPServer`` on 127.0.0.1 in a process of its own, which ``sandbox.up`` starts
and ``sandbox.down`` ends (its record is ``api`` in sandbox.json). Like RunPod it wants
``Authorization: Bearer <key>``; the key is in the state directory's ``api_key`` file.
Every request reads pods.json afresh, so a pod's ``startedAt`` moves when
``sandbox.restart`` restarts it, and a stopped pod is ``EXITED``, without direct SSH.

Each pod document validates against ``ListPodsResponse`` of RunPod's OpenAPI document and
gives podstate's live inventory what the pods file gives it (host name, 127.0.0.1, port,
cloud), plus the GPU, data centre and ``startedAt`` RunPod adds.

A pod's log is its container's output since its last start (container.log in the pod's
state directory, which the pod's bootstrap makes anew at every start: RunPod's start
script's lines, its host-key block among them), as Server-Sent Events: the backfill
(``since``, else the last ``tail`` lines), then new lines as they come, with a keep-alive
comment every ``KEEPALIVE_S`` seconds, the stream held open until the client goes. Each
line's ``ts`` is its container's start (``startedAt``).

Run as ``python -m podstate.sandbox.api STATE_DIR FD``, FD a listening socket it inherits.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
import socket
import sys
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from podstate.sandbox import vast_api
from podstate.sandbox.processes import alive, spawn, stop
from podstate.sandbox.shapes import CUDA_VERSION, GPU_LAYOUT, gpu_readings, shape_for
from podstate.sandbox.state import (
    ACTIONS_LOG,
    SandboxError,
    parse_rfc3339,
    pod_state_dir,
    read_json,
    state_dir,
)
from podstate.sizes import parse_mount_size

API_KEY_FILE = "api_key"  # in the state directory
IMAGE = "runpod/base:podstate-sandbox"
VOLUME_GB = 20  # what a local /workspace reports as its size (mounts.persistent.size)
KEEPALIVE_S = 2.0  # seconds between the keep-alive comments of a log stream
LOG_POLL_S = 0.1  # seconds between looks at a followed log


def start_api(root: Path) -> dict[str, Any]:
    """Start the sandbox's API server for the state directory ``root``; return its record:
    ``url``, ``port``, ``pid``, ``pid_start``.

    Makes a new key (``api_key``, mode 0600). The socket is bound and listening before the
    server process starts, so the API answers from the moment this returns.
    """
    key = "rpa_sandbox_" + secrets.token_hex(16)
    fd = os.open(root / API_KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    vast_api.make_key(root)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        command = [sys.executable, "-m", "podstate.sandbox.api", str(root), str(sock.fileno())]
        record = spawn([], command, root, root / "api.log", pass_fds=(sock.fileno(),))
    return {"url": f"http://127.0.0.1:{port}", "port": port, **record}


def api_env(root: Path | None = None) -> dict[str, str]:
    """Return the environment that points podstate's live inventory at the sandbox's RunPod
    API: ``RUNPOD_API_URL``, ``RUNPOD_API_KEY``, ``PODSTATE_SSH_KEY`` (the sandbox's client
    key) and ``PODSTATE_HOSTKEYS`` (a host-key store in the state directory, gone at
    ``down``). ``PODSTATE_PODS`` must not be set beside it: a pods file wins over the API.
    ``root`` is the state directory (default: ``state_dir()``).
    """
    root = root or state_dir()
    api = read_json(root / "sandbox.json").get("api")
    try:
        key = (root / API_KEY_FILE).read_text().strip()
    except OSError:
        key = ""
    if not api or not key:
        raise SandboxError("the sandbox is not up; run `podstate sandbox up` first")
    env = {
        "RUNPOD_API_URL": api["url"],
        "RUNPOD_API_KEY": key,
        "PODSTATE_SSH_KEY": str(root / "id_ed25519"),
        "PODSTATE_HOSTKEYS": str(root / "hostkeys"),
    }
    if any(record.get("vast") for record in read_json(root / "pods.json").values()):
        env["VAST_API_URL"] = api["url"]
        env["VAST_API_KEY"] = (root / vast_api.KEY_FILE).read_text().strip()
    return env


def list_pods(root: Path, now: datetime | None = None) -> dict[str, Any]:
    """Return the ``GET /v2/pods`` answer for the sandbox in ``root``: ``{"pods": [...]}``, one
    document per pod of pods.json, in pod number order."""
    now = now or datetime.now(UTC)
    disk = read_json(root / "sandbox.json").get("disk") or "4G"
    records = {k: v for k, v in read_json(root / "pods.json").items() if not v.get("vast")}
    ordered = sorted(records.items(), key=lambda item: item[1].get("number", 0))
    return {"pods": [pod_document(name, record, disk, now) for name, record in ordered]}


def pod_document(name: str, record: dict[str, Any], disk: str, now: datetime) -> dict[str, Any]:
    """Return RunPod's pod document for one sandbox pod's record (a pods.json entry).

    RUNNING, with ``ssh.direct`` at 127.0.0.1 and its port, while its sshd runs; EXITED,
    without direct SSH or runtime, when it does not (a stopped pod). ``disk`` is the
    container disk's size as ``sandbox.up`` took it ("4G").
    """
    shape = shape_for(record["number"])
    running = alive(record.get("pid"), record.get("pid_start"))
    port = record["port"]
    direct = {
        "host": "127.0.0.1",
        "port": port,
        "username": "root",
        "command": f"ssh root@127.0.0.1 -p {port}",
    }
    if shape.workspace == "sshfs":  # a network volume
        mounts: dict[str, Any] = {
            "network": [{"volumeId": f"vol{record['pod_id']}", "path": "/workspace"}]
        }
    else:
        mounts = {"persistent": {"size": VOLUME_GB, "path": "/workspace"}}
    runtime = None
    if running:
        uptime = (now - parse_rfc3339(record["started_at"])).total_seconds()
        runtime = {
            "uptime": max(0, int(uptime)),
            "ports": [{"private": 22, "public": port, "type": "tcp", "ip": "127.0.0.1"}],
        }
        gpus = _gpus(record) if shape.gpus else None
        if gpus is not None:
            runtime["gpus"] = gpus
    doc: dict[str, Any] = {
        "id": record["pod_id"],
        "name": name,
        "image": IMAGE,
        "args": "",
        "disk": max(1, parse_mount_size(disk) >> 30),
        "ports": ["22/tcp"],
        "env": {},
        "registry": None,
        "status": "RUNNING" if running else "EXITED",
        "actions": ["stop", "restart", "terminate"] if running else ["start", "terminate"],
        "mounts": mounts,
        "cloud": shape.cloud,
        "dataCenterId": shape.data_center,
        "cudaVersion": CUDA_VERSION if shape.gpus else None,
        "ssh": {"proxy": None, "direct": direct if running else None},
        "template": None,
        "cost": shape.cost_per_hour if running else 0.0,
        "locked": False,
        "globalNetworking": {"enabled": False},
        "runtime": runtime,
        "createdAt": record["created_at"],
        "startedAt": record["started_at"],
    }
    if shape.gpus:
        doc["gpu"] = {"id": shape.gpu_name, "count": shape.gpus}
    else:
        doc["cpu"] = {"id": "cpu3c", "vcpuCount": 2, "memory": 4}
    return doc


def _gpus(record: dict[str, Any]) -> list[dict[str, int]] | None:
    """Return RunPod's ``runtime.gpus`` of a running pod: each GPU's ``util`` and
    ``memoryUtil`` as its nvidia-smi stand-in reads them (its layout file, through the
    container's root), or None when that cannot be read (RunPod leaves them out)."""
    try:
        layout = Path(f"/proc/{record['pid']}/root{GPU_LAYOUT}").read_text()
        return [{"util": u, "memoryUtil": m} for u, m in gpu_readings(layout)]
    except (OSError, ValueError, IndexError, KeyError):
        return None


def _problem(status: int, title: str, detail: str) -> dict[str, Any]:
    """Return an RFC 9457 problem body, as RunPod's ``ErrorResponse``."""
    return {"title": title, "status": status, "detail": detail}


def log_events(record: dict[str, Any], since: str | None, tail: int) -> tuple[list[str], int]:
    """Return the backfill of a pod's log (its record in pods.json) as SSE event texts, and
    the byte offset in container.log where following it goes on."""
    path = Path(record["dir"]) / "container.log"
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    end = data.rfind(b"\n") + 1  # complete lines only
    lines = data[:end].decode(errors="replace").splitlines()
    started = record["started_at"]
    if since is not None:
        lines = lines if parse_rfc3339(since) <= parse_rfc3339(started) else []
    else:
        lines = lines[len(lines) - tail :] if tail else []
    return [_event(started, n, line) for n, line in enumerate(lines)], end


def _event(ts: str, number: int, line: str) -> str:
    data = json.dumps({"ts": ts, "source": "container", "line": line})
    return f"id: {ts}/{number:012d}\ndata: {data}\n\n"


class Handler(vast_api.Answers, BaseHTTPRequestHandler):
    """Answers ``GET /v2/pods`` and ``GET /v2/pods/{id}/logs`` with the Bearer key; anything
    else is a problem answer. ``listing`` and ``vast_instances`` are hooks: the tests'
    provider API (tests/api_server.py) is this handler, listing what a test sets."""

    root: Path
    key: str

    def listing(self) -> dict[str, Any]:
        """Return the ``GET /v2/pods`` answer: the sandbox's pods (``list_pods``)."""
        return list_pods(self.root)

    def do_GET(self) -> None:  # http.server's API
        """Answer one GET: 401 without the key, 404 for another path, else the pod list."""
        given = self.headers.get("Authorization") or ""
        parts = urlsplit(self.path)
        if parts.path.rstrip("/") == vast_api.PATH:
            self.vast_get(parts.query)
            return
        if not hmac.compare_digest(given.encode(), f"Bearer {self.key}".encode()):
            detail = "invalid API key" if given else "missing bearer token"
            self._send(401, _problem(401, "Unauthorized", detail), {"WWW-Authenticate": "Bearer"})
        elif urlsplit(self.path).path.rstrip("/") == "/v2/pods":
            self._send(200, self.listing())
        elif re.fullmatch(r"/v2/pods/[^/]+/logs", urlsplit(self.path).path):
            self._logs()
        else:
            detail = "the sandbox API serves GET /v2/pods and /v2/pods/{id}/logs only"
            self._send(404, _problem(404, "Not Found", detail))

    def do_POST(self) -> None:  # http.server's API
        """Answer ``POST /v2/pods/{id}/action`` with ``{"action": "stop"}``: stop the pod's
        container as RunPod does (``processes.stop``) and answer 200 with the pod, 409 when
        it is not running, 404 for no such pod; every request is a line of ``ACTIONS_LOG``
        (the action, the pod id, the status answered), which tests count."""
        given = self.headers.get("Authorization") or ""
        if not hmac.compare_digest(given.encode(), f"Bearer {self.key}".encode()):
            self._send(401, _problem(401, "Unauthorized", "invalid API key"))
            return
        match = re.fullmatch(r"/v2/pods/([^/]+)/action", urlsplit(self.path).path)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            action = json.loads(self.rfile.read(length)).get("action") if match else None
        except (ValueError, AttributeError):
            action = None
        pod_id = unquote(match.group(1)) if match else ""
        found = [(n, r) for n, r in read_json(self.root / "pods.json").items()]
        found = [(n, r) for n, r in found if r.get("pod_id") == pod_id]
        if action != "stop":
            status, doc = 400, _problem(400, "Bad Request", "the sandbox API takes stop only")
        elif not found:
            status, doc = 404, _problem(404, "Not Found", f"no pod {pod_id}")
        elif not alive(found[0][1].get("pid"), found[0][1].get("pid_start")):
            status, doc = 409, _problem(409, "Conflict", "stop is not allowed in status EXITED")
        else:
            stop(pod_state_dir(self.root, found[0][0]))
            status = 200
            doc = pod_document(found[0][0], found[0][1], "4G", datetime.now(UTC))
        with open(self.root / ACTIONS_LOG, "a") as log:
            log.write(f"{action} {pod_id} {status}\n")
        self._send(status, doc)

    def _logs(self) -> None:
        """Stream a pod's container log as RunPod does (module doc); 404 for no such pod,
        400 for a bad parameter."""
        parts = urlsplit(self.path)
        pod_id = unquote(parts.path.split("/")[3])
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        found = [(n, r) for n, r in read_json(self.root / "pods.json").items()]
        found = [(n, r) for n, r in found if r.get("pod_id") == pod_id]
        if not found:
            self._send(404, _problem(404, "Not Found", f"no pod {pod_id}"))
            return
        name = found[0][0]
        try:
            since = query.get("since")
            if since is not None and parse_rfc3339(since).tzinfo is None:
                raise ValueError
            tail = int(query.get("tail", "100"))
            if not 0 <= tail <= 5000 or query.get("source", "container") not in (
                "container",
                "system",
            ):
                raise ValueError
        except ValueError:
            self._send(400, _problem(400, "Bad Request", "bad since, tail or source"))
            return
        record = found[0][1]
        events, offset = log_events(record, since, tail)
        if query.get("source") == "system":
            events = []
        try:
            self.send_response(200)
            for header, value in (
                ("Content-Type", "text/event-stream"),
                ("Cache-Control", "no-cache"),
                ("Connection", "keep-alive"),
                ("X-Accel-Buffering", "no"),
            ):
                self.send_header(header, value)
            self.end_headers()
            self.wfile.write("".join(events).encode())
            self.wfile.flush()
            self._follow(name, record, offset, len(events), query.get("source") != "system")
        except OSError:
            pass  # the client went away: the stream ends

    def _follow(
        self, name: str, record: dict[str, Any], offset: int, number: int, lines: bool
    ) -> None:
        """Send the lines the container adds to its log, and keep-alive comments, until the
        client goes away (OSError) or the pod restarts (a new container, a new log)."""
        path = Path(record["dir"]) / "container.log"
        quiet = 0.0
        while True:
            time.sleep(LOG_POLL_S)
            now = read_json(self.root / "pods.json").get(name) or {}
            if now.get("started_at") != record["started_at"]:
                return
            try:
                with open(path, "rb") as log:
                    log.seek(offset)
                    data = log.read(1 << 20)
            except OSError:
                data = b""
            end = data.rfind(b"\n") + 1
            if lines and end:
                offset += end
                for line in data[:end].decode(errors="replace").splitlines():
                    self.wfile.write(_event(record["started_at"], number, line).encode())
                    number += 1
                quiet = 0.0
            else:
                quiet += LOG_POLL_S
            if quiet >= KEEPALIVE_S:
                self.wfile.write(b": keep-alive\n\n")
                quiet = 0.0
            self.wfile.flush()

    def _send(
        self, status: int, doc: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        body = json.dumps(doc).encode()
        vast = urlsplit(self.path).path.startswith("/api/")
        kind = "application/json" if status == 200 or vast else "application/problem+json"
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client went away


def serve(root: Path, fd: int) -> None:
    """Serve the sandbox in ``root`` on the listening socket ``fd`` until killed."""
    keys = {
        "key": (root / API_KEY_FILE).read_text().strip(),
        "vast_key": (root / vast_api.KEY_FILE).read_text().strip(),
    }
    handler = type("Handler", (Handler,), {"root": root, **keys})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
    server.socket.close()
    server.socket = socket.socket(fileno=fd)
    server.server_address = server.socket.getsockname()
    server.server_name, server.server_port = "127.0.0.1", server.server_address[1]
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]))
