"""Plain pyinfra's side of the fleet benchmark: bench/plain_pyinfra/deploy.py, timed.

Its inventory gets each pod's SSH address and podstate's resolved desired state from the same
vars directory, as Ansible's does (bench/fleet/rivals/ansible.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.common.steps import BIN, BenchError, environ, timed

DEPLOY = ["bench/plain_pyinfra/inventory.py", "bench/plain_pyinfra/deploy.py"]


def plain_hosts(pods_file: Path, vars_path: Path, work: Path) -> Path:
    """Return the JSON file of bench/plain_pyinfra/inventory.py: each pod's SSH settings, its
    ``want`` (podstate's resolved desired state) and ``cloud``."""
    from podstate.inventory.fleet import load_pods

    with environ(PODSTATE_PODS=str(pods_file), PODSTATE_VARS=str(vars_path)):
        pods = load_pods()
    hosts = {
        pod.name: {
            **{k: v for k, v in pod.data.items() if k.startswith("ssh_")},
            "ssh_strict_host_key_checking": "yes",
            "cloud": pod.data["cloud"],
            "want": pod.data["podstate"],
        }
        for pod in pods
    }
    path = work / "plain-hosts.json"
    path.write_text(json.dumps(hosts))
    return path


def plain(
    name: str, hosts: Path, env: dict[str, str], state: Path, changes: bool | None = None
) -> dict[str, Any]:
    """Return the timed ``pyinfra -y`` of the plain deploy on every pod. With ``changes``
    False, raise BenchError if it changed anything (it must find the fleet converged); True,
    if it changed nothing."""
    command = [str(BIN / "pyinfra"), "-y", *DEPLOY]
    step, output = timed(name, command, {**env, "PLAIN_PYINFRA_HOSTS": str(hosts)}, state)
    changed = _changed(output)
    if changes is not None and bool(changed) != changes:
        raise BenchError(f"{name}: {changed} change(s), expected {'some' if changes else 'none'}")
    return step


def _changed(output: str) -> int:
    """Return how many operations changed a pod, from the "Success" column of the "Grand
    total" line of pyinfra's results (an operation with no change counts as "No Change")."""
    found = re.search(r"^\s*Grand total\s+\d+\s+(\d+|-)\s", output, re.MULTILINE)
    if found is None:
        raise BenchError("plain pyinfra: no results table in its output")
    return 0 if found[1] == "-" else int(found[1])
