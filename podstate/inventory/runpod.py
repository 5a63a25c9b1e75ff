"""The live inventory: the pods RunPod's v2 REST API lists (``GET /v2/pods``), as pyinfra hosts.

Used when ``RUNPOD_API_KEY`` is set (and ``PODSTATE_PODS`` is not). Every RUNNING pod with
direct SSH becomes a pyinfra host named after the pod; the others are skipped, each with a
reason. The API client, and the environment it reads, are in ``podstate.inventory.runpod_client``;
the pod records it returns are checked in ``podstate.inventory.runpod_pods``. This module maps them
to hosts: host names, automatic groups, ``groups.yaml`` groups and host data.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from podstate.inventory import hostkey_hints, hostkeys, keylog
from podstate.inventory import live as readings
from podstate.inventory.naming import (
    Listing,
    gpu_group,
    host_names,
    inventory_pod,
    ruled,
    slug,
)
from podstate.inventory.podsfile import Pod, cloud_group
from podstate.inventory.runpod_client import LISTING_ENV, fetch, read_listing, settings
from podstate.inventory.runpod_pods import ApiPod, Skipped, kept, parse

__all__ = ["Skipped", "host_names", "listed", "slug", "to_pods"]


def auto_groups(pod: ApiPod) -> list[str]:
    """Return the groups RunPod's data puts a pod in, cloud group first.

    ``community``/``secure``; ``runpod``; ``gpu_<model>`` (from ``gpu.id``); ``dc_<data centre>``;
    ``gpus_<count>`` (``gpus_0`` for CPU pods).
    """
    groups = [cloud_group(pod.cloud), "runpod"]
    gpu = gpu_group(pod.gpu_id)
    if gpu:
        groups.append(gpu)
    dc = slug(pod.data_center) if pod.data_center else ""
    if dc:
        groups.append(f"dc_{dc}"[:63].rstrip("_"))
    groups.append(f"gpus_{pod.gpu_count}")
    return groups


def to_pods(
    listing: Listing,
    rules: dict[str, list[str]],
    names: dict[str, str],
    record_host_keys: bool = True,
    strict_host_keys: bool | None = None,
    host_key_dir: Path | None = None,
) -> list[Pod]:
    """Return inventory pods (sorted by host name) with host data and groups.

    Host data: the direct SSH address, ``pod_id``, ``cloud``, ``gpu_id``, ``gpu_count``,
    ``data_center``, ``started_at``, ``cost_per_hour`` (None: unknown), ``provider``
    (``runpod``: who can stop it, ``podstate.inventory.actions``), ``live_idle`` (what the
    API's live readings say: ``podstate.inventory.live.idle``), ``ssh_key`` from
    PODSTATE_SSH_KEY, and the host-key settings of ``podstate.inventory.hostkeys``
    (recorded in the store unless ``record_host_keys`` is false; ``strict_host_keys`` as
    ``hostkeys.plan``'s ``strict``).
    The host names are ``names`` (``naming.host_names`` of every provider's pods).
    A pod joins each ``groups.yaml`` group one of whose globs
    matches its host name or its RunPod name, after its automatic groups, in the file's order.
    """
    pods: list[Pod] = []
    trusts = [
        hostkeys.plan(
            api.id,
            names[api.key],
            api.host,
            api.port,
            api.started_at,
            host_key_dir,
            strict_host_keys,
        )
        for api in listing.pods
    ]
    if record_host_keys:  # a command that only shows the fleet reads no log
        trusts = _vouched(trusts, strict_host_keys)
    for api, trust in zip(listing.pods, trusts, strict=True):
        name = names[api.key]
        if record_host_keys:
            hostkeys.record(trust)
        groups = auto_groups(api) + ruled(rules, name, api.name)
        data: dict[str, Any] = {
            "pod_id": api.id,
            "provider": "runpod",
            "cloud": api.cloud,
            "gpu_id": api.gpu_id,
            "gpu_count": api.gpu_count,
            "data_center": api.data_center,
            "started_at": api.started_at,
            "cost_per_hour": api.cost_per_hour,
            "live_idle": None if api.live is None else readings.idle(api.live),
        }
        address = (api.host, api.port, api.user)
        pods.append(inventory_pod(name, address, trust, data, groups, listing.ssh_key))
    if record_host_keys:
        hostkey_hints.explain_mismatches(trusts)
    return sorted(pods, key=lambda pod: pod.name)


def _vouched(
    trusts: list[hostkeys.HostKeyTrust], strict: bool | None
) -> list[hostkeys.HostKeyTrust]:
    """Return ``trusts`` with the fingerprints RunPod's log shows for each pod about to take
    a new key (``keylog``: every read at once), or why it shows none."""
    wanted = {trust.pod_id: trust.started_at for trust in trusts if trust.needs_log}
    logs = keylog.read_all(settings(), wanted)
    return [
        hostkeys.vouched(t, logs[t.pod_id].fingerprints, logs[t.pod_id].reason, strict)
        if t.pod_id in logs
        else t
        for t in trusts
    ]


def listed() -> Listing:
    """Return RunPod's listing, parsed, from the API named by the environment; with
    ``PODSTATE_API_LISTING`` set (by ``podstate watch``, for the runs it starts), the listing
    is that file's and the API is not asked. The records handed on keep only the fields
    podstate reads (``runpod_pods.kept``)."""
    config = settings()
    handed = os.environ.get(LISTING_ENV)
    raw = read_listing(Path(handed)) if handed else fetch(config)
    api_pods, skipped = parse(raw, config.include_cluster)
    return Listing("runpod", api_pods, skipped, kept(raw), config.ssh_key)
