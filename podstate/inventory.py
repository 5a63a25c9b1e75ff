"""Builds pyinfra's inventory groups from the pods file and the desired state.

Every pod's state is resolved and validated here, before pyinfra connects to anything, and
handed to the roles as the host data key ``podstate``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from podstate.podsfile import Pod, read_pods_file
from podstate.spec import SpecError, VarsDir, resolve

DEFAULT_PODS = Path("inventories/pods.yaml")
DEFAULT_VARS = Path("inventories")

HostEntry = tuple[str, dict[str, Any]]


def pods_path() -> Path:
    """Return the pods file to read: ``PODSTATE_PODS``, else inventories/pods.yaml."""
    return Path(os.environ.get("PODSTATE_PODS") or DEFAULT_PODS)


def vars_path() -> Path:
    """Return the vars directory: ``PODSTATE_VARS``, else inventories/."""
    return Path(os.environ.get("PODSTATE_VARS") or DEFAULT_VARS)


def load_pods() -> list[Pod]:
    """Return the pods of the pods file, each with its resolved state in ``data['podstate']``."""
    path = pods_path()
    if not path.is_file():
        raise SpecError(
            f"no pods file at {path}: copy inventories/pods.example.yaml to {DEFAULT_PODS} "
            "or set PODSTATE_PODS"
        )
    vars_dir = vars_path()
    if not vars_dir.is_dir():
        raise SpecError(f"no vars directory at {vars_dir}: set PODSTATE_VARS to one")
    pods = read_pods_file(path)
    store = VarsDir(vars_dir)
    for pod in pods:
        pod.data["podstate"] = resolve(store.layers(pod.groups, pod.name), pod.name)
    return pods


def inventory_groups(pods: list[Pod]) -> dict[str, list[HostEntry]]:
    """Return pyinfra inventory groups (name -> [(host, data)]) for ``pods``."""
    groups: dict[str, list[HostEntry]] = {}
    for pod in pods:
        for group in pod.groups:
            groups.setdefault(group, []).append((pod.name, pod.data))
    return groups
