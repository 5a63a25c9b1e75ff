"""The live inventory: the pods RunPod's v2 REST API lists (``GET /v2/pods``), as pyinfra hosts.

Used when ``RUNPOD_API_KEY`` is set (and ``PODSTATE_PODS`` is not). Every RUNNING pod with
direct SSH becomes a pyinfra host named after the pod; the others are skipped, each with a
reason. The API client, and the environment it reads, are in ``podstate.inventory.runpod_client``;
the pod records it returns are checked in ``podstate.inventory.runpod_pods``. This module maps them
to hosts: host names, automatic groups, ``groups.yaml`` groups and host data.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from podstate.desired.errors import SpecError
from podstate.desired.load import display_path, load_yaml, spelled
from podstate.inventory import hostkey_hints, hostkeys, keylog
from podstate.inventory import live as readings
from podstate.inventory.podsfile import GROUP_NAME, HOST_NAME, Pod, cloud_group
from podstate.inventory.runpod_client import LISTING_ENV, Settings, fetch, read_listing, settings
from podstate.inventory.runpod_pods import ApiPod, Skipped, kept, parse

_RESERVED_GROUPS = ("community", "secure")
_RESERVED_PREFIXES = ("gpu_", "gpus_", "dc_")


def host_names(pods: Sequence[ApiPod | Skipped]) -> dict[str, str]:
    """Return pyinfra host names by pod id: the pod's own name where it is a valid host name
    no older pod has, else ``<name>-<pod id>`` (the name cleaned up, or the id alone when
    nothing of it is left).

    ``pods`` is every pod RunPod lists, skipped ones included, so a pod keeps its name while
    an older one of that name is stopped. Among pods that share a name the oldest
    (``createdAt``, then the pod id) keeps it: a pod that appears later never renames one that
    was there before, which would hand it another pod's ``host_vars/`` (a ``watch`` hold) or
    take its own away, and every run and every CI shard names a fleet alike from the listing
    alone. Plain names are given first, so a generated name never takes one; a generated
    name that is already taken (a pod named ``web-a1`` beside the second ``web``, of id
    ``a1``) gets ``-2``, ``-3``, ... in the same order.
    """
    ordered = sorted(pods, key=lambda pod: (hostkeys.parse_time(pod.created_at), pod.id))
    names: dict[str, str] = {}
    used: set[str] = set()
    for pod in ordered:
        if HOST_NAME.match(pod.name) and pod.name not in used:
            names[pod.id] = pod.name
            used.add(pod.name)
    for pod in ordered:
        if pod.id in names:
            continue
        name = _with_id(_clean(pod.name), pod.id)
        unique, number = name, 2
        while unique in used:
            suffix = f"-{number}"
            unique, number = name[: 63 - len(suffix)] + suffix, number + 1
        used.add(unique)
        names[pod.id] = unique
    return names


def _clean(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-._")


def _with_id(base: str, pod_id: str) -> str:
    suffix = _clean(pod_id)[:40] or "pod"
    base = base[: 62 - len(suffix)].rstrip("-._")
    return f"{base}-{suffix}" if base else suffix


def slug(text: str, drop: tuple[str, ...] = ()) -> str:
    """Return ``text`` as a group-name part: lowercase, runs of other characters as ``_``.

    Leading words in ``drop`` go first ("NVIDIA GeForce RTX 4090" -> "rtx_4090").
    """
    text = text.strip().lower()
    for word in drop:
        if text.startswith(word + " "):
            text = text[len(word) + 1 :].lstrip()
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def auto_groups(pod: ApiPod) -> list[str]:
    """Return the groups RunPod's data puts a pod in, cloud group first.

    ``community``/``secure``; ``gpu_<model>`` (from ``gpu.id``); ``dc_<data centre>``;
    ``gpus_<count>`` (``gpus_0`` for CPU pods).
    """
    groups = [cloud_group(pod.cloud)]
    gpu = slug(pod.gpu_id, ("nvidia", "geforce")) if pod.gpu_id else ""
    if gpu:
        groups.append(f"gpu_{gpu}"[:63].rstrip("_"))
    dc = slug(pod.data_center) if pod.data_center else ""
    if dc:
        groups.append(f"dc_{dc}"[:63].rstrip("_"))
    groups.append(f"gpus_{pod.gpu_count}")
    return groups


def groups_path(vars_dir: Path) -> Path:
    """Return the group rules file: ``groups.yaml`` (or ``groups.yml``) in the vars directory."""
    return spelled(vars_dir / "groups") or vars_dir / "groups.yaml"


def load_group_rules(path: Path) -> dict[str, list[str]]:
    """Return ``groups.yaml``'s rules (group -> pod name globs); {} when there is no file.

    SpecError names the file and the group when the file is not a mapping of group names
    to lists of globs.
    """
    if not path.is_file():
        return {}
    shown = display_path(path)
    rules: dict[str, list[str]] = {}
    for group, globs in load_yaml(path, shown).items():
        if not GROUP_NAME.match(group) or group.startswith("_"):
            raise SpecError(
                f"{shown}: {group}: not a valid group name (letters, digits and _, "
                "not starting with a digit or _)"
            )
        if group in _RESERVED_GROUPS or group.startswith(_RESERVED_PREFIXES):
            raise SpecError(
                f"{shown}: {group}: set from RunPod's data (community, secure, gpu_*, "
                "gpus_*, dc_*); pick another group name"
            )
        if (
            not isinstance(globs, list)
            or not globs
            or not all(isinstance(g, str) and g for g in globs)
        ):
            raise SpecError(
                f'{shown}: {group}: expected a list of pod name globs, like ["train-*"]'
            )
        rules[group] = list(globs)
    return rules


def to_pods(
    api_pods: list[ApiPod],
    rules: dict[str, list[str]],
    config: Settings,
    skipped: Sequence[Skipped] = (),
    record_host_keys: bool = True,
    host_key_dir: Path | None = None,
    strict_host_keys: bool | None = None,
) -> list[Pod]:
    """Return inventory pods (sorted by host name) with host data and groups.

    Host data: the direct SSH address, ``pod_id``, ``cloud``, ``gpu_id``, ``gpu_count``,
    ``data_center``, ``started_at``, ``cost_per_hour`` (None: unknown), ``provider``
    (``runpod``: who can stop it, ``podstate.inventory.actions``), ``live_idle`` (what the
    API's live readings say: ``podstate.inventory.live.idle``), ``ssh_key`` from
    PODSTATE_SSH_KEY, and the host-key settings of ``podstate.inventory.hostkeys``
    (recorded in the store unless ``record_host_keys`` is false; ``strict_host_keys`` as
    ``hostkeys.plan``'s ``strict``).
    The host names are ``host_names``' of these pods and the ``skipped`` ones together.
    A pod joins each ``groups.yaml`` group one of whose globs
    matches its host name or its RunPod name, after its automatic groups, in the file's order.
    """
    names = host_names([*api_pods, *skipped])
    pods: list[Pod] = []
    trusts = [
        hostkeys.plan(
            api.id,
            names[api.id],
            api.host,
            api.port,
            api.started_at,
            host_key_dir,
            strict_host_keys,
        )
        for api in api_pods
    ]
    if record_host_keys:  # a command that only shows the fleet reads no log
        trusts = _vouched(trusts, config, strict_host_keys)
    for api, trust in zip(api_pods, trusts, strict=True):
        name = names[api.id]
        if record_host_keys:
            hostkeys.record(trust)
        groups = auto_groups(api)
        groups += [
            group
            for group, globs in rules.items()
            if any(fnmatch.fnmatchcase(n, g) for n in (name, api.name) for g in globs)
        ]
        data: dict[str, Any] = {
            "ssh_hostname": api.host,
            "ssh_port": api.port,
            "ssh_user": api.user,
            **trust.host_data(),
            "pod_id": api.id,
            "cloud": api.cloud,
            "gpu_id": api.gpu_id,
            "gpu_count": api.gpu_count,
            "data_center": api.data_center,
            "started_at": api.started_at,
            "cost_per_hour": api.cost_per_hour,
            "provider": "runpod",
            "live_idle": None if api.live is None else readings.idle(api.live),
        }
        if config.ssh_key:
            data["ssh_key"] = config.ssh_key
        pods.append(Pod(name, data, list(dict.fromkeys(groups))))
    if record_host_keys:
        hostkey_hints.explain_mismatches(trusts)
    return sorted(pods, key=lambda pod: pod.name)


def _vouched(
    trusts: list[hostkeys.HostKeyTrust], config: Settings, strict: bool | None
) -> list[hostkeys.HostKeyTrust]:
    """Return ``trusts`` with the fingerprints RunPod's log shows for each pod about to take
    a new key (``keylog``: every read at once), or why it shows none."""
    wanted = {trust.pod_id: trust.started_at for trust in trusts if trust.needs_log}
    logs = keylog.read_all(config, wanted)
    return [
        hostkeys.vouched(t, logs[t.pod_id].fingerprints, logs[t.pod_id].reason, strict)
        if t.pod_id in logs
        else t
        for t in trusts
    ]


def load(
    vars_dir: Path, record_host_keys: bool = True, strict_host_keys: bool | None = None
) -> tuple[list[Pod], list[Skipped], list[Any]]:
    """Return the pods to manage, the skipped ones, and the listing they come from (each pod
    record with only the fields podstate reads, ``runpod_pods.kept``), from the API named by
    the environment (host keys as ``to_pods`` says).

    The group rules are read before the API is asked, so a bad groups.yaml costs no request.
    With ``PODSTATE_API_LISTING`` set (by ``podstate watch``, for the runs it starts), the
    listing is that file's and the API is not asked.
    """
    config = settings()
    rules = load_group_rules(groups_path(vars_dir))
    handed = os.environ.get(LISTING_ENV)
    raw = read_listing(Path(handed)) if handed else fetch(config)
    api_pods, skipped = parse(raw, config.include_cluster)
    pods = to_pods(
        api_pods, rules, config, skipped, record_host_keys, strict_host_keys=strict_host_keys
    )
    return pods, skipped, kept(raw)
