"""Builds pyinfra's inventory groups from the pods file or the RunPod API, and the desired state.

Every pod's state is resolved and validated here, before pyinfra connects to anything, and
handed to the roles as the host data key ``podstate``.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podstate import settings
from podstate.desired import spec
from podstate.desired.errors import Layer, SpecError, located
from podstate.desired.load import VarsDir
from podstate.desired.state import State
from podstate.desired.typed import build
from podstate.inventory import hostkeys, keyfiles
from podstate.inventory.naming import Listing, groups_path, host_names, load_group_rules
from podstate.inventory.podsfile import Pod, read_pods_file
from podstate.pod import fits
from podstate.providers import registry
from podstate.providers.record import Provider
from podstate.pyinfra_api import hostkeys as policy

if TYPE_CHECKING:
    from podstate.inventory.runpod import Skipped

DEFAULT_PODS = Path("inventories/pods.yaml")
DEFAULT_VARS = Path("inventories")
HostEntry = tuple[str, dict[str, Any]]

_STRICT_HOST_KEYS: ContextVar[bool | None] = ContextVar("strict_host_keys", default=None)


def pods_path() -> Path:
    """Return the pods file to read: ``PODSTATE_PODS``, else inventories/pods.yaml."""
    return Path(os.environ.get("PODSTATE_PODS") or DEFAULT_PODS)


def vars_path() -> Path:
    """Return the vars directory: ``PODSTATE_VARS``, else inventories/."""
    return Path(os.environ.get("PODSTATE_VARS") or DEFAULT_VARS)


@dataclass
class Inventory:
    """The pods to manage, the pods the providers list that podstate skips, where they came
    from, and what the listing met on the way (``notes``: one line each)."""

    pods: list[Pod]
    skipped: list[Skipped]
    source: str  # "pods file <path>", "RunPod API", "Vast API", joined by " and "
    # the providers' records as a run handed them reads them ({"pods": RunPod's, "vast":
    # Vast's}); None: no provider
    listing: dict[str, list[Any]] | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


@contextmanager
def strict_host_keys(strict: bool | None) -> Iterator[None]:
    """Within the block, inventories built in this process refuse the keys of API pods seen
    for the first time (True) or trust them (False); None leaves it to
    ``PODSTATE_STRICT_HOST_KEYS`` (``hostkeys.strict_from_env``).

    It exists for the command that builds the inventory in its own process through pyinfra
    (``podstate check --strict-host-keys`` has pyinfra's make_inventory run
    inventories/pods.py, which calls ``load_pods``): the setting reaches ``load_inventory``
    for that one build, instead of through the process's environment, which everything the
    command ran afterwards, and every process it started, would inherit. A plain ``pyinfra
    inventories/pods.py`` run has no podstate command around it: the environment variable
    is its way.
    """
    token = _STRICT_HOST_KEYS.set(strict)
    try:
        yield
    finally:
        _STRICT_HOST_KEYS.reset(token)


def load_inventory(record_host_keys: bool = True) -> Inventory:
    """Return the inventory, each pod with its resolved state in ``data['podstate']``.

    The sources are ``sources()``'s; a pod two sources name is refused. ``record_host_keys=False``
    leaves the host-key store of API pods untouched (for commands that only show); whether
    a key seen for the first time is refused is ``strict_host_keys``'s.
    """
    chosen = sources()
    if "file" in chosen and not pods_path().is_file():
        api = "" if os.environ.get("PODSTATE_INVENTORY") else ", or set RUNPOD_API_KEY to list"
        raise SpecError(
            f"no pods file at {pods_path()}: copy inventories/pods.example.yaml to "
            f"{DEFAULT_PODS} or set PODSTATE_PODS{api and api + ' your pods from RunPod'}"
        )
    store = _vars_dir()
    rules = load_group_rules(groups_path(store.root))
    listings: dict[str, Listing] = {
        source: provider(source).call("listing") for source in chosen if provider(source).listing
    }
    names = host_names([record for found in listings.values() for record in found.records()])
    pods: list[Pod] = []
    skipped: list[Skipped] = []
    shown: list[str] = []
    for source in chosen:
        if source not in listings:  # the pods file
            path = pods_path()
            found = [_with_rules(pod, rules) for pod in read_pods_file(path)]
            shown.append(f"{provider(source).shown} {path}")
        else:
            listing = listings[source]
            found = provider(source).call(
                "to_pods", listing, rules, names, record_host_keys, _STRICT_HOST_KEYS.get()
            )
            skipped += listing.skipped
            shown.append(provider(source).shown)
        taken = {pod.name for pod in pods}
        for pod in found:
            if pod.name in taken:
                raise SpecError(
                    f"pod {pod.name} is in more than one of PODSTATE_INVENTORY's sources "
                    f"({', '.join(chosen)}): rename one, or read one source"
                )
        pods += found
    expect_host_keys(pods)
    handed = {provider(s).listing_key: found.kept for s, found in listings.items()} or None
    notes = [note for found in listings.values() for note in found.notes]
    return Inventory(_resolved(pods, store), skipped, " and ".join(shown), handed, notes)


def provider(source: str) -> Provider:
    """Return the provider ``source`` names (``podstate.providers.registry``): its record
    says how to list its pods and how they are shown; its API client is imported only when
    its listing is called, so a run that reads only the pods file loads none."""
    return registry.named(source)


def expect_host_keys(pods: list[Pod]) -> None:
    """Make the connections of this process refuse, before authenticating, a new host key
    that is not among a pod's ``host_key_fingerprints``: those RunPod's log shows for the
    container (``hostkeys.vouched``), or those a pods file lists."""
    expected = {}
    for pod in pods:
        fingerprints = tuple(pod.data.get("host_key_fingerprints") or ())
        if fingerprints:
            shown_by = (
                "RunPod's log shows for this container"
                if "host_key_trust" in pod.data
                else f"the pods file lists for {pod.name} (host_key_fingerprints)"
            )
            port = int(pod.data.get("ssh_port") or 22)
            address = hostkeys.known_hosts_pattern(pod.data.get("ssh_hostname") or pod.name, port)
            expected[address] = (fingerprints, shown_by)
    policy.expect(expected)


def sources() -> list[str]:
    """Return the inventory sources to read, in order: ``file`` (the pods file), ``runpod``,
    ``vast`` (``registry.every()``'s names).

    ``PODSTATE_INVENTORY`` names them (a comma list); else ``PODSTATE_PODS`` means the file;
    else each provider's key (``RUNPOD_API_KEY``, ``VAST_API_KEY``: its ``key_variable``)
    means that provider; else the file. It exists
    so that a pod list is never widened silently: with the default pods file present and a
    provider's key exported (as it is for the provider's own tools), and neither variable set
    to choose, SpecError names both sources instead of picking one.
    """
    named = os.environ.get("PODSTATE_INVENTORY", "").strip()
    known = [p.name for p in registry.every()]
    if named:
        chosen = [part.strip() for part in named.split(",")]
        for part in chosen:
            if part not in known:
                raise SpecError(
                    f"PODSTATE_INVENTORY: unknown source {part!r} "
                    f"(allowed: {', '.join(known)}, or a comma list of them)"
                )
        if len(set(chosen)) < len(chosen):
            raise SpecError(f"PODSTATE_INVENTORY: {named}: names a source twice")
        if os.environ.get("PODSTATE_PODS") and "file" not in chosen:
            raise SpecError(
                f"PODSTATE_PODS names a pods file, which PODSTATE_INVENTORY={named} does not "
                "read: add file to PODSTATE_INVENTORY, or unset PODSTATE_PODS"
            )
        return chosen
    if os.environ.get("PODSTATE_PODS"):
        return ["file"]
    keyed = [p for p in registry.every() if p.key_variable and os.environ.get(p.key_variable)]
    providers = [p.name for p in keyed]
    if providers and DEFAULT_PODS.is_file():
        keys = " and ".join(str(p.key_variable) for p in keyed)
        raise SpecError(
            f"both {DEFAULT_PODS} and {keys} name pods: set PODSTATE_INVENTORY to file or "
            f"{' or '.join(providers)} to choose which"
        )
    return providers or ["file"]


def _with_rules(pod: Pod, rules: dict[str, list[str]]) -> Pod:
    """Return the pods file's ``pod`` in the groups of ``groups.yaml`` whose globs match its
    name, after its own groups, as the live inventory does."""
    matched = [g for g, globs in rules.items() if any(fnmatchcase(pod.name, x) for x in globs)]
    pod.groups = list(dict.fromkeys([*pod.groups, *matched]))
    return pod


def load_pods() -> list[Pod]:
    """Return the pods to manage, with resolved states, for pyinfra's inventory.

    Skipped API pods and the listing's notes are reported on stderr, one line each, and
    fail nothing; an API listing with no pod to manage is a SpecError, since pyinfra would
    have nothing to do, and so is a key file that is not there (``keyfiles.check``).
    """
    inventory = load_inventory()
    keyfiles.check(inventory.pods)
    for skipped in inventory.skipped:
        print(skipped.line(), file=sys.stderr)
    for note in inventory.notes:
        print(f"podstate: {note}", file=sys.stderr)
    if not inventory.pods:
        raise SpecError(
            f"the {inventory.source} lists no pod podstate can manage "
            f"({len(inventory.skipped)} skipped): it needs running pods with an SSH port "
            "(RunPod: 22/tcp exposed as a public TCP port)"
        )
    return inventory.pods


def layers(pod: Pod) -> list[Layer]:
    """Return the layers of ``pod``'s desired state in merge order, podstate's shipped
    defaults first: what ``podstate show`` says each value came from."""
    return _vars_dir().layers(pod.groups, pod.name)


def _vars_dir() -> VarsDir:
    vars_dir = vars_path()
    if not vars_dir.is_dir():
        raise SpecError(f"no vars directory at {vars_dir}: set PODSTATE_VARS to one")
    store = VarsDir(vars_dir)
    store.check()
    return store


def _resolved(pods: list[Pod], store: VarsDir) -> list[Pod]:
    """Return ``pods`` with each one's merged, validated state in ``data['podstate']``, and
    the connect and command time limits (``podstate.settings``) in its host data.

    Pods whose state comes from the same files (most of a fleet) are validated once: that is
    most of the time spent before the first connection, and it grew with the fleet.
    """
    resolved: dict[tuple[str, ...], dict[str, Any]] = {}
    for pod in pods:
        pod.data = {**settings.host_data(), **pod.data}
        layers = store.layers(pod.groups, pod.name)
        files = tuple(layer.display for layer in layers)
        if files not in resolved:
            resolved[files] = resolve(layers, pod.name)
        pod.data["podstate"] = copy.deepcopy(resolved[files])
    return pods


def resolve(layers: list[Layer], pod: str) -> dict[str, Any]:
    """Return the pod's merged, validated and normalized state (``spec.resolve``), refused
    when a command it makes would not fit in one argument (``podstate.pod.fits``): one line
    naming the file and the key, before any pod is touched. The check needs the roles that
    build the commands, which the desired state is below, so it is made here."""
    state = spec.resolve(layers, pod)
    try:
        fits.check(state)
    except SpecError as e:
        raise located(layers, e, pod) from None
    return state


def desired(data: dict[str, Any], source: str = "a deploy file") -> State:
    """Return ``data`` as a validated, normalized, typed desired state, as roles take it.

    For a team's own deploy file calling a podstate role with its own arguments (a second
    venv); relative file names are read from the working directory. Raises SpecError, one
    line naming ``source`` and the key, for what the schema refuses and for a command that
    would be too long.
    """
    return build(resolve([Layer(source, data, Path.cwd())], "any"))


def inventory_groups(pods: list[Pod]) -> dict[str, list[HostEntry]]:
    """Return pyinfra inventory groups (name -> [(host, data)]) for ``pods``."""
    groups: dict[str, list[HostEntry]] = {}
    for pod in pods:
        for group in pod.groups:
            groups.setdefault(group, []).append((pod.name, pod.data))
    return groups
