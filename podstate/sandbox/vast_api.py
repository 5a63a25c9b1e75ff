"""The sandbox's Vast.ai API: ``GET /api/v1/instances`` for its Vast instances, answered as
Vast's API does (the instance list of its OpenAPI spec, keyset pages of 25 at most,
``next_token``/``after_token``), served by the sandbox's API server (``api``) beside its
RunPod API, with a key of its own (``vast_api_key``).

It also answers ``PUT /api/v0/instances/{id}`` with ``{"state": "stopped"}``: the
instance stops as a Vast one does (``manage``).

Two faults a test can turn on, as files in the state directory: ``pad(root, n)`` lists ``n``
stopped instances more (no pod behind them), so that a listing runs past one page;
``rate_limit(root, n)`` answers the next ``n`` requests 429 without ``Retry-After``, as
Vast does when requests come too often.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hmac
import json
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from podstate.sandbox.processes import alive, stop
from podstate.sandbox.shapes import GPU_LAYOUT, gpu_readings, shape_of
from podstate.sandbox.state import ACTIONS_LOG, parse_rfc3339, pod_state_dir, read_json

KEY_FILE = "vast_api_key"  # in the state directory
FAULTS_FILE = "vast_faults.json"
PATH = "/api/v1/instances"
IMAGE = "vastai/base-image:podstate-sandbox"
PAGE = 25


def make_key(root: Path) -> str:
    """Write a new key for the sandbox's Vast API (mode 0600) and return it."""
    key = secrets.token_hex(32)
    fd = os.open(root / KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key


def pad(root: Path, stopped: int) -> None:
    """List ``stopped`` stopped instances besides the sandbox's own, from the next request on."""
    _update(root, lambda faults: faults.update(stopped=stopped))


def rate_limit(root: Path, requests: int) -> None:
    """Answer the next ``requests`` requests 429, without ``Retry-After``."""
    _update(root, lambda faults: faults.update(rate_limited=requests))


def _update(root: Path, change: Any) -> dict[str, int]:
    """Change the faults file under a lock; return it as it was before."""
    with open(root / FAULTS_FILE, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        try:
            faults = json.loads(handle.read() or "{}")
        except ValueError:
            faults = {}
        before = dict(faults)
        change(faults)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(faults))
    return before


def answer(
    root: Path,
    query: dict[str, list[str]],
    listed: Callable[[int], list[dict[str, Any]]] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Return (status, body) of ``GET /api/v1/instances`` with ``query`` (the key checked):
    a page of ``listed(stopped)``'s instances (default: the sandbox's, ``instances``)."""
    faults = _update(root, lambda f: f.update(rate_limited=max(0, f.get("rate_limited", 0) - 1)))
    if faults.get("rate_limited", 0) > 0:
        return 429, {"detail": "API requests too frequent endpoint threshold=1.0"}
    try:
        limit = int((query.get("limit") or ["25"])[0])
    except ValueError:
        return 400, {"error": "invalid_request", "msg": "limit is not an integer"}
    limit = 5 if limit <= 0 else min(limit, PAGE)
    after = 0
    if query.get("after_token"):
        try:
            token = json.loads(base64.b64decode(query["after_token"][0], validate=True))
            after = int(token["values"]["id"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            return 400, {"error": "invalid_token", "msg": "invalid after_token"}
    listed = listed or (lambda stopped: instances(root, stopped))
    everyone = sorted(listed(faults.get("stopped", 0)), key=lambda doc: doc["id"])
    rest = [doc for doc in everyone if doc["id"] > after]
    page, more = rest[:limit], len(rest) > limit
    next_token = None
    if more:
        next_token = base64.b64encode(json.dumps({"values": {"id": page[-1]["id"]}}).encode())
    labels: dict[str, int] = {}
    for doc in everyone:
        labels[doc["label"] or ""] = labels.get(doc["label"] or "", 0) + 1
    return 200, {
        "success": True,
        "instances_found": len(page),
        "total_instances": len(everyone),
        "label_counts": labels,
        "next_token": next_token.decode() if next_token else None,
        "instances": page,
    }


def instances(root: Path, stopped: int = 0) -> list[dict[str, Any]]:
    """Return the instance documents of the sandbox's Vast instances, and ``stopped`` more."""
    records = read_json(root / "pods.json")
    docs = [
        instance_document(name, record) for name, record in records.items() if record.get("vast")
    ]
    for index in range(1, stopped + 1):
        docs.append(_stopped(index))
    return docs


def instance_document(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """Return Vast's instance document for one sandbox Vast instance (a pods.json entry):
    running while its container runs, with ``ports["22/tcp"]`` where its shape is reached
    directly and Vast's proxy (``ssh_host``, ``ssh_port``) always; stopped otherwise."""
    shape = shape_of(record)
    running = alive(record.get("pid"), record.get("pid_start"))
    port = record["port"]
    direct = shape.endpoint == "direct"
    doc = _base(int(record["pod_id"]), name, "running" if running else "stopped")
    doc.update(
        image_runtype="ssh ssh_direc ssh_proxy" if direct else "ssh ssh_proxy",
        ssh_host="localhost",
        ssh_port=port,
        gpu_name=shape.gpu_name or "",
        num_gpus=shape.gpus,
        gpu_totalram=shape.gpu_memory_mib,
        gpu_ram=shape.gpu_memory_mib,
        gpu_util=_gpu_util(record) if running else None,
        direct_port_count=2 if direct else 0,
        start_date=parse_rfc3339(record["created_at"]).timestamp(),
        uptime_mins=None,
    )
    if running:
        mapped = [{"HostIp": "0.0.0.0", "HostPort": str(port)}]
        doc["ports"] = {"22/tcp": mapped} if direct else {}
    return doc


class Answers:
    """The Vast API's answers, a part of the sandbox API's request handler (``api``): the
    Vast key checked as Vast does, then ``answer`` or ``manage``."""

    root: Path
    vast_key: str
    path: str
    headers: Any
    rfile: Any
    _send: Callable[..., None]

    def do_PUT(self) -> None:  # http.server's API
        """Answer Vast's ``PUT /api/v0/instances/{id}`` (``manage``)."""
        if self._vast_key():
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(*manage(self.root, urlsplit(self.path).path, body))

    def vast_get(self, query: str) -> None:
        """Answer ``GET /api/v1/instances`` with ``query`` (``answer``)."""
        if self._vast_key():
            self._send(*answer(self.root, parse_qs(query), self.vast_instances))

    def vast_instances(self, stopped: int) -> list[dict[str, Any]]:
        """Return the instances listed: the sandbox's, and ``stopped`` more (``instances``);
        a hook the tests' provider API overrides (see ``api.Handler``)."""
        return instances(self.root, stopped)

    def _vast_key(self) -> bool:
        """Return whether the request carries the Vast key; else answer 401 as Vast does."""
        given = self.headers.get("Authorization") or ""
        if hmac.compare_digest(given.encode(), f"Bearer {self.vast_key}".encode()):
            return True
        self._send(401, _error("auth_error", "Invalid user key"))
        return False


def _gpu_util(record: dict[str, Any]) -> float | None:
    """Return the instance's ``gpu_util``: its busiest GPU's utilization as its nvidia-smi
    stand-in reads it (tests make a GPU busy with ``inside.gpu_busy``), None when that
    cannot be read."""
    try:
        layout = Path(f"/proc/{record['pid']}/root{GPU_LAYOUT}").read_text()
        return float(max(util for util, _ in gpu_readings(layout)))
    except (OSError, ValueError, IndexError, KeyError):
        return None


def manage(root: Path, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """Return (status, body) of ``PUT /api/v0/instances/{id}`` (``path``) with ``body``
    (the key checked): ``{"state": "stopped"}`` stops the instance's container as Vast does
    (``processes.stop``: its container disk stays) and answers 200 ``success``, a stopped
    one too; 404 for no such instance, 400 for anything else. Each stop asked is a line of
    ``ACTIONS_LOG`` (``stop ID STATUS``), as the RunPod side's."""
    match = re.fullmatch(r"/api/v0/instances/(\d+)/?", path)
    try:
        wanted = json.loads(body).get("state") if match else None
    except (ValueError, AttributeError):
        wanted = None
    ident = match.group(1) if match else ""
    found = [
        (name, record)
        for name, record in read_json(root / "pods.json").items()
        if record.get("vast") and str(record.get("pod_id")) == ident
    ]
    if not match or wanted != "stopped":
        answer = 400, _error("invalid_args", 'the sandbox takes {"state": "stopped"} only')
    elif not found:
        answer = 404, _error("not_found", f"no instance {ident}")
    else:
        stop(pod_state_dir(root, found[0][0]))
        answer = 200, {"success": True}
    if wanted == "stopped":
        with open(root / ACTIONS_LOG, "a") as log:
            log.write(f"stop {ident} {answer[0]}\n")
    return answer


def _error(error: str, msg: str) -> dict[str, Any]:
    return {"success": False, "error": error, "msg": msg}


def _stopped(index: int) -> dict[str, Any]:
    doc = _base(90_000_000 + index, f"parked-{index}", "stopped")
    doc.update(ssh_host="localhost", ssh_port=10_000 + index, gpu_name="RTX 3090", num_gpus=1)
    return doc


def _base(number: int, label: str, status: str) -> dict[str, Any]:
    return {
        "id": number,
        "label": label,
        "actual_status": status,
        "intended_status": status,
        "cur_state": status,
        "next_state": status,
        "template_id": None,
        "template_hash_id": None,
        "template_name": None,
        "image_uuid": IMAGE,
        "image_args": [],
        "extra_env": [],
        "onstart": "",
        "status_msg": f"success, {status}",
        "public_ipaddr": "127.0.0.1",
        "local_ipaddrs": "127.0.0.1",
        "machine_id": 4242,
        "host_id": 42,
        "verification": "unverified",
        "dph_total": 0.35,
        "reliability2": 0.99,
        "start_date": 1_780_000_000.0 + number % 1000,
        "cpu_util": 0.0,
        "volume_info": [],
    }
