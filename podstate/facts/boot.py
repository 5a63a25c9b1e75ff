"""The probe's boot section: the identity of this container (its provider's variables, as the boot
hook reads them; the pod's ``provider`` says which), and the host keys the boot hook keeps beside
its data (whether they are the pod's own, compared on the pod, and the sha256 of the pod's public
keys, which binds the saved keys to the hook's data: no private key ever leaves the pod)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from podstate.facts.decode import by_key, decode
from podstate.facts.section import Argument, Section
from podstate.paths import ID_CACHE
from podstate.providers import registry
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.shell import quote_path

# The container's environment: RunPod gives every container RUNPOD_POD_ID there, Vast
# VAST_CONTAINERLABEL and CONTAINER_ID. It is read from the container's first process, never
# from a file a start script writes later, nor from what an inventory says is at this
# address; only the variables named, by name (the rest of it holds secrets, Vast's
# CONTAINER_API_KEY among them).
ENVIRON = "/proc/1/environ"
# The variables of the container's environment that name this pod, by provider (host data
# ``provider``, which the inventories set; a pods file's pod without one is RunPod's): read
# by name and nothing else of it, their values joined by "/". Each provider's ``identity``.
IDENTITY = {p.name: p.identity for p in registry.pod_providers()}

# The provider assumed outside a pod (``assuming``): podstate.pod.fits checks a desired state
# with each provider's probe before any pod is touched.
_ASSUMED: ContextVar[str] = ContextVar("podstate_boot_provider", default=registry.DEFAULT)


@dataclass(frozen=True)
class Boot:
    """What the probe read for the boot hook."""

    pod_id: str | None  # the container's identity; None: its environment has none, or unread
    keys: str | None  # "same": the saved host keys are the pod's own, "differs"; None: unread
    public: str | None  # the sha256 of the pod's public host keys; None: it has none


@dataclass(frozen=True)
class BootRequest:
    """What the boot section reads (``Request.boot``), as the boot role asks it."""

    keys: str | None  # the data directory, to compare the saved host keys; None: not compared
    identity: tuple[str, ...]  # the variables that name this container (``identity``)


def sent(asked: BootRequest | None) -> dict[str, Any] | None:
    """Return the probe's ``boot`` argument for ``asked`` (``probe_lines``' ``args``), the plain
    dict pyinfra's fact is called with."""
    return None if asked is None else {"keys": asked.keys, "identity": asked.identity}


def provider() -> str:
    """Return this pod's provider (``IDENTITY``'s keys), which its identity and the boot hook's
    layout depend on: the pod's host data ``provider`` (set by the inventories, and by a pods
    file's ``provider:``; none is RunPod's); outside a pod, the one ``assuming`` names
    (RunPod's by default). The one place that decides it."""
    data = pyinfra_plan.current_host_data()
    if data is None:
        return _ASSUMED.get()
    return data.get("provider") or registry.DEFAULT


@contextmanager
def assuming(name: str) -> Iterator[None]:
    """Within the block, outside a pod, take the provider to be ``name``."""
    token = _ASSUMED.set(name)
    try:
        yield
    finally:
        _ASSUMED.reset(token)


def identity() -> tuple[str, ...]:
    """Return the variables that name this pod (its provider's ``identity``) for its
    ``provider``."""
    return registry.named(provider()).identity


def identity_line(names: tuple[str, ...]) -> str:
    """Return sh that sets ``i`` to this container's identity: the values of the variables
    ``names`` in ``ENVIRON`` that are set, in order, joined by "/" (empty: none is set, or
    it cannot be read), as the boot hook's ``identity`` reads it (scripts/boot.sh). The
    shell's own ``case`` finds each variable, and the boot and records sections both need
    it, so the second takes what the first read (``id_names``, ``id_read``). The rest of
    the environment is dropped at once, never shown.

    A container's first process keeps its environment, so one program (``tr``, which makes
    its entries lines) reads it once a container: what it found is kept in ``ID_CACHE`` on
    the container disk, keyed by the boot's id, process 1's start (read as the work
    section reads it: ``work_stat``) and ``names``, and read from there while that key is
    this container's. A disk copied from another container (a baked image, a Vast copy)
    carries that container's key, and is read again; so is a cache not whole (its last
    line ``.``), and nothing is kept where the environment cannot be read."""
    key = " ".join(names)
    nl = "\n"  # each entry of the environment is a line: one starts after a newline
    return (
        f'if [ "${{id_names-}}" = "{key}" ]; then i=$id_read; else i= id_k=;'
        " { read -r id_k </proc/sys/kernel/random/boot_id; } 2>/dev/null;"
        f' if [ -n "$id_k" ] && work_stat 1; then id_k="id1 $id_k:$w_st {key}"; else id_k=; fi;'
        ' if [ -n "$id_k" ] && { read -r v && [ "$v" = "$id_k" ] && IFS= read -r v &&'
        f' read -r n && [ "$n" = . ]; }} 2>/dev/null <{ID_CACHE}; then i=${{v#=}};'
        f" elif id_env=$(tr '\\0' '\\n' 2>/dev/null <{ENVIRON}); then id_env=\"{nl}$id_env{nl}\";"
        f" for n in {key}; do"
        f' case $id_env in *"{nl}$n="*) v=${{id_env#*"{nl}$n="}}; v=${{v%%"{nl}"*}};'
        f' [ -z "$v" ] || i=${{i:+$i/}}$v ;; esac; done; id_env=;'
        f' [ -z "$id_k" ] || {{ printf \'%s\\n\' "$id_k" "=$i" . >{ID_CACHE}; }} 2>/dev/null; fi;'
        f' id_names="{key}" id_read=$i; fi'
    )


def probe_lines(args: dict[str, Any] | None) -> list[str]:
    """Return the probe's lines for the hook (read-only): ``boot.pod_id``, the identity of the
    container (``identity_line`` of ``identity``, the provider's variable names; no line when it has
    none or cannot be read), and with ``keys`` (the data directory) ``boot.keys``: ``same`` when the
    host keys saved there are the pod's own, compared on the pod, else ``differs``; and
    ``boot.public``: the sha256 of the pod's public host keys (none: there are none)."""
    if not args:
        return []
    lines = [
        identity_line(tuple(args["identity"]))
        + '; if [ -n "$i" ]; then enc "$i"; echo "boot.pod_id $enc_v"; fi'
    ]
    if args.get("keys"):
        d = quote_path(args["keys"])
        lines.append(
            f"k=differs; if [ -f {d}/hostkeys.tar ] && {{ read -r s _ <{d}/hostkeys.sum; }}"
            ' 2>/dev/null && [ "$(cat /etc/ssh/ssh_host_* 2>/dev/null | sha256sum)" = "$s  -" ];'
            ' then k=same; fi; echo "boot.keys $k"; set -- /etc/ssh/ssh_host_*.pub;'
            ' if [ -f "$1" ]; then p=$(cat -- "$@" | sha256sum); echo "boot.public ${p%% *}";'
            " fi"
        )
    return lines


def parse(output: list[str]) -> Boot:
    """Return the probe's :class:`Boot` from its ``boot.*`` lines."""
    fields = by_key(output)
    pod_id = decode(fields["pod_id"]).strip() if "pod_id" in fields else ""
    return Boot(pod_id=pod_id or None, keys=fields.get("keys"), public=fields.get("public"))


SECTION = Section(
    "boot",
    fields=("boot",),
    parse=lambda answer: {"boot": parse(answer.lines("boot")) if "boot" in answer else None},
    lines=lambda arguments: probe_lines(arguments["boot"]),
    arguments=(Argument("boot", sent=sent),),
)
