"""What podstate knows of a provider, in one record: how a run selects and lists its pods,
what a pod of it is like (the identity its container carries, whether a stop keeps the
container disk), how to stop one, and what that costs.

A provider's behaviour (its listing, its pods, its stop) lives with its API client in
``podstate.inventory``, a layer above the ones that read the rest of the record (the probe,
the boot hook); the record names it as ``module:function``, as the table of subcommands
names its handlers, imported only when called: a run that reads a pods file loads no
provider's API client.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Provider:
    """One source of pods.

    ``name`` is PODSTATE_INVENTORY's word for it, its pods' host data ``provider`` and a
    group of theirs; ``shown`` names the source in reports ("RunPod API"); ``key_variable``
    the environment variable whose presence selects it (None: only PODSTATE_INVENTORY does).
    ``listing`` (``() -> inventory.naming.Listing``), ``to_pods`` (``(listing, rules,
    names, record_host_keys, strict_host_keys) -> [inventory.podsfile.Pod]``) and ``stop``
    (``(pod id) -> inventory.actions.Stopped``) are ``module:function``; None: it has none
    (the pods file lists no API and stops nothing). ``listing_key`` is its records' key in
    a listing handed on to the runs ``podstate watch`` starts.
    A pod of it: ``identity`` (the container's variables that name it, read by the probe
    and the boot hook; empty: no container of its own), ``identified`` (that identity in
    words), ``keeps_disk`` (a stop keeps the container disk, so the boot hook lives there),
    ``stop_cost`` (what a stop costs, in each stop's event), ``groups`` (the automatic
    groups its data sets, which no ``groups.yaml`` group may take), ``start_hook`` (what
    runs a command at every container start, as a report names it), ``called`` (what a
    report calls one of its pods: "pod", "Vast instance").
    """

    name: str
    shown: str
    key_variable: str | None = None
    listing: str | None = None
    to_pods: str | None = None
    stop: str | None = None
    listing_key: str = ""
    identity: tuple[str, ...] = ()
    identified: str = ""
    keeps_disk: bool = False
    stop_cost: str = ""
    groups: tuple[str, ...] = ()
    start_hook: str = ""
    called: str = "pod"

    def call(self, part: str, *args: Any) -> Any:
        """Return what the provider's ``part`` (``listing``, ``to_pods``, ``stop``) returns
        for ``args``, its module imported now (see the module's docstring for why).
        ValueError when the provider has no such part."""
        ref = getattr(self, part)
        if not ref:
            raise ValueError(f"provider {self.name} has no {part}")
        module, _, function = ref.partition(":")
        return getattr(importlib.import_module(module), function)(*args)
