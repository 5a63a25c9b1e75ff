"""A sandbox's state directory: where it is, and the records kept in it.

``pods.json`` holds each pod's shape, port, processes and start times (for tests, for the
sandbox API and for ``down()`` in another process), ``sandbox.json`` the storage sshd and
the API server, and ``pods.yaml`` is the pods file the rest of podstate reads.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from podstate.jsonfile import write_json


class SandboxError(Exception):
    """A sandbox operation failed; the message is one line, fit for the command line."""


ACTIONS_LOG = "api-actions.log"  # in the state directory: each stop the sandbox API answered


def state_dir() -> Path:
    """Return the sandbox state directory: $PODSTATE_SANDBOX, or .sandbox in the cwd."""
    configured = os.environ.get("PODSTATE_SANDBOX")
    return Path(configured or Path.cwd() / ".sandbox").resolve()


def pods_file() -> Path:
    """Return the path of the pods file ``up()`` writes (YAML, podstate's pods file format)."""
    return state_dir() / "pods.yaml"


def pods_json() -> Path:
    """Return the path of the JSON record of each pod's shape, port and processes."""
    return state_dir() / "pods.json"


def pod_state_dir(root: Path, name: str) -> Path:
    """Return the directory that holds pod ``name``'s files, keys and logs."""
    return root / "pods" / name


def load_pods() -> dict[str, dict[str, Any]]:
    """Return the records of pods.json by pod name, in pod number order ({} when none)."""
    pods = read_json(pods_json())
    return dict(sorted(pods.items(), key=lambda item: item[1].get("number", 0)))


def save_pod(root: Path, name: str, record: dict[str, Any]) -> None:
    """Replace pod ``name``'s record in pods.json, under a lock on the state directory, so
    that pods restarted at once (from threads or processes) keep each other's records."""
    fd = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        records = read_json(root / "pods.json")
        records[name] = record
        write_json(root / "pods.json", records, sort_keys=True)
    finally:
        os.close(fd)  # releases the lock


def rfc3339(moment: datetime) -> str:
    """Return ``moment`` as RunPod writes ``startedAt``: RFC 3339 in UTC with a ``Z``, here
    to the millisecond, so that two starts within one second still differ."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_rfc3339(text: str) -> datetime:
    """Return an RFC 3339 timestamp (``rfc3339``'s) as an aware datetime."""
    return datetime.fromisoformat(text)


def start_time(previous: str | None = None) -> str:
    """Return the start time to record for a container starting now (``rfc3339``): now, or
    a millisecond after ``previous`` (the pod's last start) where the clock has not passed it,
    so that a restart always moves ``startedAt`` forward."""
    now = datetime.now(UTC)
    if previous:
        now = max(now, parse_rfc3339(previous) + timedelta(milliseconds=1))
    return rfc3339(now)


def read_json(path: Path) -> dict[str, Any]:
    """Return a JSON record of the state directory; {} when it is missing or unreadable."""
    try:
        return cast(dict[str, Any], json.loads(path.read_text()))  # records podstate wrote
    except (OSError, ValueError):
        return {}


def pods_yaml(root: Path, records: dict[str, dict[str, Any]]) -> str:
    """Return the pods file for the pods' records: podstate's pods file format."""
    lines = [
        "defaults:",
        "  ssh_user: root",
        f"  ssh_key: {_yaml_str(str(root / 'id_ed25519'))}",
        f"  ssh_known_hosts_file: {_yaml_str(str(root / 'known_hosts'))}",
        '  ssh_strict_host_key_checking: "yes"',
        "pods:",
    ]
    for name, rec in records.items():
        lines += [
            f"  {name}:",
            "    ssh_hostname: 127.0.0.1",
            f"    ssh_port: {rec['port']}",
            f"    cloud: {rec['cloud']}",
        ]
        if rec.get("vast"):
            lines.append("    provider: vast")
    return "\n".join(lines) + "\n"


def _yaml_str(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_./-]+", value) else json.dumps(value)
