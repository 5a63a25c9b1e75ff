"""A sandbox's state directory: where it is, and the records kept in it.

``pods.json`` holds each pod's shape, port and processes (for tests and for ``down()`` in
another process), ``sandbox.json`` the storage sshd, and ``pods.yaml`` is the pods file the
rest of podstate reads.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any


class SandboxError(Exception):
    """A sandbox operation failed; the message is one line, fit for the command line."""


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


def read_json(path: Path) -> dict[str, Any]:
    """Return a JSON record of the state directory; {} when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
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
    return "\n".join(lines) + "\n"


def _yaml_str(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_./-]+", value) else json.dumps(value)
