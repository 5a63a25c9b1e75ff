"""The live inventory's Vast.ai instances (``GET /api/v1/instances``), as pyinfra hosts.

Used when ``vast`` is one of the inventory's sources (``VAST_API_KEY``, or
``PODSTATE_INVENTORY``). Every running instance with an SSH endpoint becomes a pyinfra host
named after its label (``C.<id>`` without one); the others are skipped, each with a reason.
The client is ``vast_client``, the records are checked in ``vast_instances``; this module
says what Vast's instances are as hosts (``naming.Hosting``): their address, host data,
automatic groups, and that nothing vouches for their host keys.

Vast instances count as COMMUNITY for the NCCL guards: ``verification`` says who vouched for
the machine, not how its GPUs are linked. Their host keys are trusted on first use and
never renewed by a restart: Vast keeps the container disk, host keys included, across a
stop, so a changed key is refused.
"""

from __future__ import annotations

import json
from typing import Any

from podstate.inventory import hostkeys, naming
from podstate.inventory import live as readings
from podstate.inventory.naming import gpu_group, reserved
from podstate.inventory.podsfile import GROUP_NAME
from podstate.inventory.vast_client import VastClient
from podstate.inventory.vast_instances import VastInstance
from podstate.providers.vast import VAST

CLOUD = "COMMUNITY"
# Why a Vast instance's new key is trusted unverified (the reports say it).
NO_KEY_LOG = "Vast's API serves no log of the container's host keys"


def label_group(instance: VastInstance) -> tuple[str | None, str | None]:
    """Return the group an instance's label puts it in and, where the label is not a group
    name podstate can use, the note that says so (the instance is managed all the same,
    in its other groups)."""
    label = instance.label
    if label is None:
        return None, None
    if not GROUP_NAME.fullmatch(label) or label.startswith("_"):
        why = "not a valid group name (letters, digits and _, not starting with a digit)"
    elif reserved(label):
        why = "a group podstate sets itself"
    else:
        return label, None
    return None, (
        f"Vast instance {instance.id}: its label {json.dumps(label)} is {why}, so it puts "
        "the instance in no group of its own; relabel it, or match it in groups.yaml"
    )


def auto_groups(instance: VastInstance) -> list[str]:
    """Return the groups Vast's data puts an instance in: ``community``, ``vast``, its
    label's, ``gpu_<model>``, ``gpus_<count>``."""
    groups = ["community", VAST.name]
    label, _ = label_group(instance)
    if label:
        groups.append(label)
    gpu = gpu_group(instance.gpu_name)
    if gpu:
        groups.append(gpu)
    groups.append(f"gpus_{instance.gpu_count}")
    return groups


def hosted(instance: VastInstance) -> naming.Hosted:
    """Return what a Vast instance is as a host: its endpoint's address; its host data:
    ``pod_id`` (the instance id), ``provider``, ``endpoint`` (direct or proxy), ``cloud``
    (COMMUNITY), ``gpu_id``, ``gpu_count``, ``cost_per_hour`` (Vast's ``dph_total``; None:
    unknown), ``live_idle`` (from ``gpu_util``: ``live.one_utilization``),
    ``verification``; and its automatic groups (``auto_groups``)."""
    live = readings.one_utilization(instance.gpu_util)
    data: dict[str, Any] = {
        "pod_id": instance.id,
        "provider": VAST.name,
        "endpoint": instance.endpoint,
        "cloud": CLOUD,
        "gpu_id": instance.gpu_name,
        "gpu_count": instance.gpu_count,
        "cost_per_hour": instance.dph_total,
        "live_idle": None if live is None else readings.idle(live),
        "verification": instance.verification,
        "started_at": None,
    }
    return (instance.host, instance.port, "root"), data, auto_groups(instance)


def vouch(
    trusts: list[hostkeys.HostKeyTrust], strict: bool | None, record_host_keys: bool
) -> list[hostkeys.HostKeyTrust]:
    """Return ``trusts`` as nothing vouches for them: Vast serves no log of the container's
    host keys (``NO_KEY_LOG``), so a key is trusted on first use, and never renewed."""
    return [hostkeys.vouched(trust, (), NO_KEY_LOG, strict) for trust in trusts]


# The provider record's listing and pods: Vast's listing, parsed (``Client.listed``), and
# its instances as inventory pods (``naming.Hosting.to_pods``), each label that gives no
# group adding a note to the listing's.
listed = VastClient.listed
to_pods = naming.Hosting(hosted, vouch, lambda instance: label_group(instance)[1]).to_pods
