"""The live inventory's Vast.ai instances (``GET /api/v1/instances``), as pyinfra hosts.

Used when ``vast`` is one of the inventory's sources (``VAST_API_KEY``, or
``PODSTATE_INVENTORY``). Every running instance with an SSH endpoint becomes a pyinfra host
named after its label (``C.<id>`` without one); the others are skipped, each with a reason.
The client is ``vast_client``, the records are checked in ``vast_instances``; this module
maps them to hosts: automatic groups, ``groups.yaml`` groups and host data.

Vast instances count as COMMUNITY for the NCCL guards: ``verification`` says who vouched for
the machine, not how its GPUs are linked. Their host keys are trusted on first use and
never renewed by a restart: Vast keeps the container disk, host keys included, across a
stop, so a changed key is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from podstate.inventory import api_http, hostkeys, naming
from podstate.inventory import live as readings
from podstate.inventory.api_http import InventoryError
from podstate.inventory.naming import Listing, gpu_group, reserved
from podstate.inventory.podsfile import GROUP_NAME, Pod
from podstate.inventory.runpod_client import LISTING_ENV
from podstate.inventory.vast_client import fetch, settings
from podstate.inventory.vast_instances import VastInstance, kept, parse
from podstate.providers.vast import VAST

CLOUD = "COMMUNITY"
LISTING_KEY = VAST.listing_key  # its records' key in a listing handed on (PODSTATE_API_LISTING)
# Why a Vast instance's new key is trusted unverified (the reports say it).
NO_KEY_LOG = "Vast's API serves no log of the container's host keys"


def label_group(instance: VastInstance) -> tuple[str | None, str | None]:
    """Return the group an instance's label puts it in and, where the label is not a group
    name podstate can use, the note that says so (the instance is managed all the same,
    in its other groups)."""
    label = instance.label
    if label is None:
        return None, None
    if not GROUP_NAME.match(label) or label.startswith("_"):
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


def to_pods(
    listing: Listing,
    rules: dict[str, list[str]],
    names: dict[str, str],
    record_host_keys: bool = True,
    strict_host_keys: bool | None = None,
) -> list[Pod]:
    """Return inventory pods (sorted by host name) for Vast's listing, named by ``names``.

    Host data: the endpoint's address, ``endpoint`` (direct or proxy), ``pod_id`` (the
    instance id), ``provider``, ``cloud`` (COMMUNITY), ``gpu_id``, ``gpu_count``,
    ``cost_per_hour`` (Vast's ``dph_total``; None: unknown), ``live_idle`` (from
    ``gpu_util``: ``live.one_utilization``), ``verification``, ``ssh_key`` from
    PODSTATE_SSH_KEY, and the host-key settings (``hostkeys``, under ``vast-<id>``, never
    renewed by a restart).
    Each label that gives no group adds a note to ``listing.notes``.
    """
    trusts = [
        hostkeys.vouched(
            hostkeys.plan(
                f"vast-{instance.id}",
                names[instance.key],
                instance.host,
                instance.port,
                None,
                None,
                strict_host_keys,
            ),
            (),
            NO_KEY_LOG,
            strict_host_keys,
        )  # fmt: skip
        for instance in listing.pods
    ]

    listing.notes += [note for instance in listing.pods if (note := label_group(instance)[1])]
    return naming.to_pods(listing, rules, names, trusts, record_host_keys, hosted)


def hosted(instance: VastInstance) -> naming.Hosted:
    """Return what a Vast instance is as a host: its endpoint's address, its host data and
    its automatic groups (``auto_groups``)."""
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


def listed() -> Listing:
    """Return Vast's listing, parsed, from the API the environment names; with
    ``PODSTATE_API_LISTING`` set (by ``podstate watch``), its ``vast`` records are read
    instead and the API is not asked."""
    config = settings()
    handed = os.environ.get(LISTING_ENV)
    notes: list[str] = []
    if handed:
        raw = _handed(Path(handed))
    else:
        fetched = fetch(config)
        raw, notes = fetched.instances, fetched.notes
    instances, skipped = parse(raw)
    return Listing(
        VAST.name, instances, skipped, kept(raw), api_http.ssh_key_file(os.environ), notes
    )


def _handed(path: Path) -> list[Any]:
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        raise InventoryError(f"{LISTING_ENV}: cannot read a listing from {path}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(LISTING_KEY), list):
        raise InventoryError(f"{LISTING_ENV}: {path} holds no '{LISTING_KEY}' list")
    return doc[LISTING_KEY]
