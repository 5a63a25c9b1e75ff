"""Host names and group-name parts for the pods providers list, whichever provider.

A provider's pods and the ones it skips are given host names together, across providers,
so that the same listing always names a fleet alike.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from podstate.desired.errors import SpecError
from podstate.desired.load import display_path, load_yaml, spelled
from podstate.inventory import hostkey_hints, hostkeys
from podstate.inventory.podsfile import GROUP_NAME, HOST_NAME, Pod
from podstate.providers import registry

# The prefixes of the groups the providers' data sets (the automatic groups; their names are
# the providers' ``groups``, ``reserved_groups``): no other group may take them.
RESERVED_PREFIXES = ("gpu_", "gpus_", "dc_")


class Listed(Protocol):
    """What naming reads of a listed pod: its key (unique across providers), its name and
    when it was made (RFC 3339)."""

    @property
    def key(self) -> str: ...

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def created_at(self) -> str: ...


@dataclass
class Listing:
    """One provider's listing, parsed: the pods podstate can manage and the ones it skips
    (records with ``key``, ``id``, ``name``, ``created_at``), the raw records as a run it
    hands them on keeps them (``kept``), what the listing met on the way (``notes``), and
    the private key file for every pod (PODSTATE_SSH_KEY)."""

    provider: str  # "runpod" or "vast": PODSTATE_INVENTORY's word
    pods: list[Any]
    skipped: list[Any]
    kept: list[Any]
    ssh_key: str | None
    notes: list[str] = field(default_factory=list)

    def records(self) -> list[Any]:
        """Return every pod listed, skipped ones too: all that hold names."""
        return [*self.pods, *self.skipped]


def host_names(pods: Sequence[Listed]) -> dict[str, str]:
    """Return pyinfra host names by pod key: the pod's own name where it is a valid host name
    no older pod has, else ``<name>-<pod id>`` (the name cleaned up, or the id alone when
    nothing of it is left).

    ``pods`` is every pod the providers list, skipped ones included, so a pod keeps its name
    while an older one of that name is stopped. Among pods that share a name, whichever
    provider lists them, the oldest (creation time, then the pod id) keeps it: a pod that
    appears later never renames one that was there before, which would hand it another pod's
    ``host_vars/`` (a ``watch`` hold) or take its own away, and every run and every CI shard
    names a fleet alike from the listing alone. Plain names are given first, so a generated
    name never takes one; a generated name that is already taken (a pod named ``web-a1``
    beside the second ``web``, of id ``a1``) gets ``-2``, ``-3``, ... in the same order.
    """
    ordered = sorted(pods, key=lambda pod: (hostkeys.parse_time(pod.created_at), pod.key))
    names: dict[str, str] = {}
    used: set[str] = set()
    for pod in ordered:
        if HOST_NAME.fullmatch(pod.name) and pod.name not in used:
            names[pod.key] = pod.name
            used.add(pod.name)
    for pod in ordered:
        if pod.key in names:
            continue
        name = _with_id(_clean(pod.name), pod.id)
        unique, number = name, 2
        while unique in used:
            suffix = f"-{number}"
            unique, number = name[: 63 - len(suffix)] + suffix, number + 1
        used.add(unique)
        names[pod.key] = unique
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


def gpu_group(model: str | None) -> str | None:
    """Return the group of a GPU model (``gpu_rtx_4090``), None when there is none."""
    gpu = slug(model, ("nvidia", "geforce")) if model else ""
    return f"gpu_{gpu}"[:63].rstrip("_") if gpu else None


def reserved_groups() -> tuple[str, ...]:
    """Return the automatic groups every provider's data sets (each one's ``groups``), once
    each in the registry's order: ``community``, ``secure``, ``runpod``, ``vast``."""
    return tuple(dict.fromkeys(g for p in registry.every() for g in p.groups))


def reserved(group: str) -> bool:
    """Return whether ``group`` is a name the providers' data sets (``reserved_groups``, or
    one of ``RESERVED_PREFIXES``)."""
    return group in reserved_groups() or group.startswith(RESERVED_PREFIXES)


def ruled(rules: dict[str, list[str]], *names: str) -> list[str]:
    """Return the ``groups.yaml`` groups one of whose globs matches one of ``names``, in the
    file's order."""
    return [
        group
        for group, globs in rules.items()
        if any(fnmatch.fnmatchcase(n, g) for n in names for g in globs)
    ]


def inventory_pod(
    name: str,
    address: tuple[str, int, str],
    trust: hostkeys.HostKeyTrust,
    data: dict[str, Any],
    groups: list[str],
    ssh_key: str | None,
) -> Pod:
    """Return the inventory pod ``name`` of a provider's listing: its SSH ``address`` (host,
    port, user), the host-key settings of ``trust``, the provider's host ``data``, and the
    private key file for every pod (``ssh_key``, PODSTATE_SSH_KEY); in ``groups`` (its
    automatic ones, then those of ``groups.yaml``), each once."""
    host, port, user = address
    data = {"ssh_hostname": host, "ssh_port": port, "ssh_user": user, **trust.host_data(), **data}
    if ssh_key:
        data["ssh_key"] = ssh_key
    return Pod(name, data, list(dict.fromkeys(groups)))


# What a provider's to_pods says of one of its records (``to_pods``): its SSH address
# (host, port, user), its host data and its automatic groups.
Hosted = tuple[tuple[str, int, str], dict[str, Any], list[str]]


def to_pods(
    listing: Listing,
    rules: dict[str, list[str]],
    names: dict[str, str],
    trusts: list[hostkeys.HostKeyTrust],
    record_host_keys: bool,
    hosted: Callable[[Any], Hosted],
) -> list[Pod]:
    """Return the inventory pods of a provider's ``listing`` (sorted by host name), each
    named by ``names`` (``host_names`` of every provider's pods), with the host-key settings
    of its trust in ``trusts`` (recorded in the store, and mismatches explained, unless
    ``record_host_keys`` is false), and what ``hosted`` says of its record: its address,
    host data and automatic groups, then the ``groups.yaml`` groups one of whose globs
    matches its host name or the provider's name of it. Every provider's ``to_pods`` ends
    here, so that a pod is made alike whoever lists it."""
    pods: list[Pod] = []
    for record, trust in zip(listing.pods, trusts, strict=True):
        name = names[record.key]
        if record_host_keys:
            hostkeys.record(trust)
        address, data, groups = hosted(record)
        groups = groups + ruled(rules, name, record.name)
        pods.append(inventory_pod(name, address, trust, data, groups, listing.ssh_key))
    if record_host_keys:
        hostkey_hints.explain_mismatches(trusts)
    return sorted(pods, key=lambda pod: pod.name)


# How a provider vouches for its pods' host keys (``Hosting.vouch``): the planned trusts,
# ``strict_host_keys`` and ``record_host_keys`` in; the trusts with what vouches for each out.
Vouch = Callable[[list[hostkeys.HostKeyTrust], bool | None, bool], list[hostkeys.HostKeyTrust]]


@dataclass(frozen=True)
class Hosting:
    """What makes a provider's listed records hosts, where providers differ: ``hosted``
    (a record's address, host data and automatic groups), ``vouch`` (what vouches for the
    host keys: the container's log on RunPod, nothing on Vast) and ``note`` (what a record
    adds to the listing's notes, None: nothing). ``to_pods`` is the rest, alike for all."""

    hosted: Callable[[Any], Hosted]
    vouch: Vouch
    note: Callable[[Any], str | None] = lambda record: None

    def to_pods(
        self,
        listing: Listing,
        rules: dict[str, list[str]],
        names: dict[str, str],
        record_host_keys: bool = True,
        strict_host_keys: bool | None = None,
    ) -> list[Pod]:
        """Return the inventory pods of the provider's ``listing`` (``to_pods``), named by
        ``names``, with the host-key settings of ``hostkeys.plan`` for each record's
        address, kept in the store under its key (``vast:1`` as ``vast-1``) and vouched for
        by ``vouch`` (recorded unless ``record_host_keys`` is false; ``strict_host_keys`` as
        ``hostkeys.plan``'s ``strict``). Each record's ``note`` joins ``listing.notes``."""
        trusts = [
            hostkeys.plan(
                record.key.replace(":", "-"),
                names[record.key],
                record.host,
                record.port,
                record.started_at,
                None,
                strict_host_keys,
            )
            for record in listing.pods
        ]
        trusts = self.vouch(trusts, strict_host_keys, record_host_keys)
        listing.notes += [note for record in listing.pods if (note := self.note(record))]
        return to_pods(listing, rules, names, trusts, record_host_keys, self.hosted)


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
        if not GROUP_NAME.fullmatch(group) or group.startswith("_"):
            raise SpecError(
                f"{shown}: {group}: not a valid group name (letters, digits and _, "
                "not starting with a digit or _)"
            )
        if reserved(group):
            raise SpecError(
                f"{shown}: {group}: set from the providers' data ({_reserved_text()}); "
                "pick another group name"
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


def _reserved_text() -> str:
    """Return the reserved group names in words: ``community, ..., gpu_*, gpus_*, dc_*``."""
    return ", ".join([*reserved_groups(), *(f"{prefix}*" for prefix in RESERVED_PREFIXES)])
