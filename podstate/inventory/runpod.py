"""The live inventory: the pods RunPod's v2 REST API lists (``GET /v2/pods``), as pyinfra hosts.

Used when ``RUNPOD_API_KEY`` is set (and ``PODSTATE_PODS`` is not). Every RUNNING pod with
direct SSH becomes a pyinfra host named after the pod; the others are skipped, each with a
reason. The API client, and the environment it reads, are in ``podstate.inventory.runpod_client``;
the pod records it returns are checked in ``podstate.inventory.runpod_pods``. This module says
what RunPod's pods are as hosts (``naming.Hosting``): their address, host data, automatic
groups, and what vouches for their host keys.
"""

from __future__ import annotations

from typing import Any

from podstate.inventory import hostkeys, keylog, naming
from podstate.inventory import live as readings
from podstate.inventory.naming import gpu_group, host_names, slug
from podstate.inventory.podsfile import cloud_group
from podstate.inventory.runpod_client import RunPodClient, settings
from podstate.inventory.runpod_pods import ApiPod, Skipped
from podstate.providers.runpod import RUNPOD

__all__ = ["Skipped", "host_names", "listed", "slug", "to_pods"]


def auto_groups(pod: ApiPod) -> list[str]:
    """Return the groups RunPod's data puts a pod in, cloud group first.

    ``community``/``secure``; ``runpod``; ``gpu_<model>`` (from ``gpu.id``); ``dc_<data centre>``;
    ``gpus_<count>`` (``gpus_0`` for CPU pods).
    """
    groups = [cloud_group(pod.cloud), RUNPOD.name]
    gpu = gpu_group(pod.gpu_id)
    if gpu:
        groups.append(gpu)
    dc = slug(pod.data_center) if pod.data_center else ""
    if dc:
        groups.append(f"dc_{dc}"[:63].rstrip("_"))
    groups.append(f"gpus_{pod.gpu_count}")
    return groups


def hosted(api: ApiPod) -> naming.Hosted:
    """Return what a RunPod pod is as a host: its direct SSH address; its host data:
    ``pod_id``, ``provider`` (``runpod``: who can stop it, ``podstate.inventory.actions``),
    ``cloud``, ``gpu_id``, ``gpu_count``, ``data_center``, ``started_at``, ``cost_per_hour``
    (None: unknown), ``live_idle`` (what the API's live readings say:
    ``podstate.inventory.live.idle``); and its automatic groups (``auto_groups``)."""
    data: dict[str, Any] = {
        "pod_id": api.id,
        "provider": RUNPOD.name,
        "cloud": api.cloud,
        "gpu_id": api.gpu_id,
        "gpu_count": api.gpu_count,
        "data_center": api.data_center,
        "started_at": api.started_at,
        "cost_per_hour": api.cost_per_hour,
        "live_idle": None if api.live is None else readings.idle(api.live),
    }
    return (api.host, api.port, api.user), data, auto_groups(api)


def vouch(
    trusts: list[hostkeys.HostKeyTrust], strict: bool | None, record_host_keys: bool
) -> list[hostkeys.HostKeyTrust]:
    """Return ``trusts`` with the fingerprints RunPod's log shows for each pod about to take
    a new key (``keylog``: every read at once), or why it shows none; as they are for a
    command that only shows the fleet (``record_host_keys`` false), which reads no log."""
    if not record_host_keys:
        return trusts
    wanted = {trust.pod_id: trust.started_at for trust in trusts if trust.needs_log}
    logs = keylog.read_all(settings(), wanted)
    return [
        hostkeys.vouched(t, logs[t.pod_id].fingerprints, logs[t.pod_id].reason, strict)
        if t.pod_id in logs
        else t
        for t in trusts
    ]


# The provider record's listing and pods: RunPod's listing, parsed (``Client.listed``), and
# its pods as inventory pods (``naming.Hosting.to_pods``).
listed = RunPodClient.listed
to_pods = naming.Hosting(hosted, vouch).to_pods
