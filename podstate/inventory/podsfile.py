"""The pods file: which pods exist and how to reach them (see inventories/pods.example.yaml)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podstate.desired.errors import SpecError, key_text, short
from podstate.desired.load import load_yaml
from podstate.providers import registry
from podstate.pyinfra_api import ssh

# Names and fingerprints are matched whole (``fullmatch``): ``$`` with ``match`` would take
# "trainer\n", a host beside "trainer" and a host_vars file name.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
CLOUDS = ("COMMUNITY", "SECURE")
_POD_KEYS = ("cloud", "groups", "provider", "host_key_fingerprints", "cost_per_hour")
# What ``ssh-keygen -lf`` prints of a key, and RunPod's start script in the pod's log.
FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


@dataclass
class Pod:
    """One pod to manage: its host name, pyinfra host data and groups (cloud group first)."""

    name: str
    data: dict[str, Any]
    groups: list[str]


def cloud_group(cloud: object) -> str:
    """Return ``secure`` for SECURE Cloud pods and ``community`` for everything else."""
    return "secure" if str(cloud).upper() == "SECURE" else "community"


def read_pods_file(path: Path, display: str | None = None) -> list[Pod]:
    """Return the pods listed in a pods file; SpecError naming file and key otherwise."""
    shown = display or str(path)
    doc = load_yaml(path, shown)
    for key in doc:
        if key not in ("defaults", "pods"):
            raise SpecError(f"{shown}: {key_text([key])}: unknown key (allowed: defaults, pods)")
    defaults = doc.get("defaults") or {}
    pods = doc.get("pods")
    if not isinstance(defaults, dict):
        raise SpecError(f"{shown}: defaults: expected a mapping of host data")
    _check_host_data(defaults, shown, "defaults")
    if not isinstance(pods, dict) or not pods:
        raise SpecError(f"{shown}: pods: expected a mapping of pod names to their settings")
    result = []
    for name, settings in pods.items():
        if not isinstance(name, str) or not HOST_NAME.fullmatch(name):
            raise SpecError(
                f"{shown}: {key_text(['pods', name])}: not a valid pod name "
                "(letters, digits, '.', '_', '-')"
            )
        settings = settings or {}
        if not isinstance(settings, dict):
            raise SpecError(f"{shown}: pods.{name}: expected a mapping of settings")
        _check_host_data(settings, shown, f"pods.{name}")
        groups = settings.get("groups", [])
        if not isinstance(groups, list) or not all(
            isinstance(g, str) and GROUP_NAME.fullmatch(g) for g in groups
        ):
            raise SpecError(
                f"{shown}: pods.{name}.groups: expected a list of group names "
                "(letters, digits and _)"
            )
        data = {**defaults, **{k: v for k, v in settings.items() if k != "groups"}}
        cloud = data["cloud"] = str(data.get("cloud", "COMMUNITY")).upper()
        for key in ("ssh_key", "ssh_known_hosts_file"):
            if isinstance(data.get(key), str):
                data[key] = str(Path(data[key]).expanduser())
        provider = [data["provider"]] if "provider" in data else []
        ordered = [cloud_group(cloud), *provider] + [g for g in groups if g != cloud_group(cloud)]
        result.append(Pod(name, data, list(dict.fromkeys(ordered))))
    return result


def _check_host_data(data: dict[str, Any], shown: str, where: str) -> None:
    """Raise SpecError for a key that is neither podstate's (cloud, groups, provider) nor one
    the SSH connector reads (a typo would be passed on unread: ``ssh_prot`` connects to port 22),
    suggesting the nearest, and for a value the key cannot take."""
    allowed = sorted(ssh.data_keys() | set(_POD_KEYS))
    for key, value in data.items():
        if not isinstance(key, str) or key not in allowed:
            near = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}? " if near else ""
            raise SpecError(
                f"{shown}: {key_text([where, key])}: unknown key ({hint}allowed: "
                f"{', '.join(allowed)})"
            )
        if key == "ssh_port" and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536
        ):
            raise SpecError(f"{shown}: {where}.ssh_port: expected a port number, got {value!r}")
        if key == "cloud" and (not isinstance(value, str) or value.upper() not in CLOUDS):
            raise SpecError(
                f"{shown}: {where}.cloud: {short(value)} is not one of: {', '.join(CLOUDS)} "
                "(the cloud decides the NCCL guards)"
            )
        # a pods file's ``provider:`` (its pod joins that group): one whose containers name
        # themselves (``registry.pod_providers``)
        providers = [p.name for p in registry.pod_providers()]
        if key == "provider" and value not in providers:
            raise SpecError(
                f"{shown}: {where}.provider: {short(value)} is not one of: {', '.join(providers)}"
            )
        if key == "cost_per_hour" and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
        ):
            raise SpecError(
                f"{shown}: {where}.cost_per_hour: expected a price in USD per hour "
                f"(a number >= 0, like 2.99), got {short(value)}"
            )
        if key == "host_key_fingerprints":
            if (
                not isinstance(value, list)
                or not value
                or not all(isinstance(f, str) and FINGERPRINT.fullmatch(f) for f in value)
            ):
                raise SpecError(
                    f"{shown}: {where}.host_key_fingerprints: expected a list of SHA256 "
                    "fingerprints as ssh-keygen -lf prints them (SHA256: and 43 characters), "
                    f"got {short(value)}"
                )
        elif key != "groups" and isinstance(value, (dict, list)):
            raise SpecError(f"{shown}: {where}.{key}: expected a single value, got {value!r}")
