"""Vast.ai's instance records, checked: the instances podstate can manage, how to reach
each (direct or through Vast's SSH proxy), and why it skips the others.

``parse`` reads the raw ``instances`` the client fetched (``vast_client``) through the one
record checker (``records.Checker``): the fields podstate uses, declared here, are
type-checked, the rest left alone; ``kept`` drops the rest (a template's ``extra_env`` and
``onstart`` may hold a user's tokens) from what is handed on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory.records import Checker, Field, Skipped, shown
from podstate.providers.vast import VAST

# actual_status values Vast documents; null is "provisioning".
STATUSES = (
    "loading", "running", "stopped", "frozen", "exited", "rebooting", "unknown", "offline",
)  # fmt: skip
# Why an instance two records of one listing name is skipped.
TWICE = (
    "listed twice in one listing (its pages shifted while they were read): which record "
    "holds is unknown; skipped until a listing names it once"
)
NEVER = "9999-12-31T00:00:00Z"  # the creation time of an instance without start_date: newest


@dataclass(frozen=True)
class VastInstance:
    """The parts of a Vast instance the inventory uses, checked for type."""

    id: str  # Vast's instance (contract) id, as text
    name: str  # its label, else C.<id> (Vast's VAST_CONTAINERLABEL)
    label: str | None
    host: str
    port: int
    endpoint: str  # "direct" (public_ipaddr and the host port of 22/tcp) or "proxy"
    gpu_name: str | None
    gpu_count: int
    gpu_util: float | None
    dph_total: float | None  # USD an hour, all in
    verification: str | None  # who vouched for the machine: not how its GPUs are linked
    machine_id: int | None
    created_at: str  # RFC 3339 of start_date: who keeps a shared name
    started_at: None = None  # Vast gives no time of the container's start

    @property
    def key(self) -> str:
        """Return the instance's key among every provider's pods (``naming.host_names``)."""
        return f"vast:{self.id}"


def _id(number: int) -> str:
    if number <= 0:
        raise ValueError(f"not an instance id: {number}")
    return str(number)


def _created(value: float) -> str:
    """Return ``start_date`` (epoch seconds) as RFC 3339."""
    try:
        return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"not a time: {value!r}") from None


def _percent(value: float) -> float:
    if not 0 <= value <= 100:
        raise ValueError(f"expected a percentage from 0 to 100, got {value:g}")
    return value


def _known(key: str, kind: type = str, read: Callable[[Any], Any] | None = None) -> Field:
    """Return a field Vast leaves out or nulls when it does not know it (None then)."""
    return Field(key, kind, required=False, nullable=True, read=read)


# The fields of an instance record podstate reads, in the order they are checked: every
# instance's; a running one's; one's with an SSH endpoint. ``_endpoint`` reads its own.
HEAD = (_known("label"), _known("start_date", float, _created))
STATUS = _known("actual_status")
INSTANCE = (
    _known("num_gpus", int),
    _known("gpu_name"),
    _known("gpu_util", float, _percent),
    _known("dph_total", float),
    _known("verification"),
    _known("machine_id", int),
)
# All a listing handed on keeps: those, and the statuses Vast's CLI shows.
READ = (
    "id", "label", "actual_status", "intended_status", "cur_state", "public_ipaddr", "ports",
    "ssh_host", "ssh_port", "image_runtype", "gpu_name", "num_gpus", "gpu_util", "dph_total",
    "start_date", "verification", "machine_id",
)  # fmt: skip
CHECK = Checker(
    VAST.shown,
    READ,
    "instances",
    "an instance object",
    VAST.name,
    Field("id", int, read=_id),
    HEAD,
    lambda ident, head: (head["label"] or f"C.{ident}", head["start_date"] or NEVER),
    twice=TWICE,
    null_is_missing=True,
)
kept = CHECK.kept


def parse(raw: list[Any]) -> tuple[list[VastInstance], list[Skipped]]:
    """Return the instances podstate can manage and the ones it skips, in the API's order.

    Manageable: ``actual_status`` running, with an SSH endpoint: the direct one where
    ``ports["22/tcp"]`` has a host port (``public_ipaddr``), else Vast's proxy (``ssh_host``,
    ``ssh_port``, plus one where ``image_runtype`` has ``jupyter``, as Vast's CLI has it).
    Skipped, each with its reason, so that the others are listed: one not running, one
    without an endpoint (a direct port without an address), one whose id two records have.
    InventoryError names the instance and the field of a record that is not one.
    """
    return CHECK.parse(raw, _instance)


def _instance(
    item: dict[str, Any], where: str, ident: str, head: dict[str, Any]
) -> VastInstance | str:
    """Return the instance a checked record is, or why it is skipped."""
    why = _not_running(CHECK.value(item, where, STATUS))
    if why:
        return why
    endpoint = _endpoint(item, where)
    if isinstance(endpoint, str):
        return endpoint
    host, port, kind = endpoint
    found = CHECK.fields(item, where, INSTANCE)
    label = head["label"] or None
    return VastInstance(
        id=ident,
        name=label or f"C.{ident}",
        label=label,
        host=host,
        port=port,
        endpoint=kind,
        gpu_name=found["gpu_name"] or None,
        gpu_count=found["num_gpus"] or 0,
        gpu_util=found["gpu_util"],
        dph_total=found["dph_total"],
        verification=found["verification"],
        machine_id=found["machine_id"],
        created_at=head["start_date"] or NEVER,
    )


def _not_running(status: str | None) -> str | None:
    """Return why an instance of ``actual_status`` is skipped; None when it runs."""
    if status == "running":
        return None
    if status is None:
        return "status null (still provisioning)"
    if status not in STATUSES:
        return f"status {shown(status)}, which Vast does not document: not managed"
    return f"status {status}"


def _endpoint(item: dict[str, Any], where: str) -> tuple[str, int, str] | str:
    """Return (host, port, "direct" or "proxy") of a running instance, or why there is none."""
    ports = CHECK.value(item, where, _known("ports", dict)) or {}
    mapped = ports.get("22/tcp")
    if mapped:
        if not isinstance(mapped, list) or not isinstance(mapped[0], dict):
            raise CHECK.unexpected(
                f"{where}.ports.22/tcp", f"expected a list of host ports, got {kind_of(mapped)}"
            )
        host = (CHECK.value(item, where, _known("public_ipaddr")) or "").strip()
        port = _port(mapped[0].get("HostPort"))
        if host and port:
            return host, port, "direct"
        missing = "a public_ipaddr" if not host else "a HostPort that is a port"
        return (
            f"a direct port for 22/tcp without {missing}: no address to reach it at yet; "
            "wait for Vast to give one, or recreate the instance"
        )
    proxy = CHECK.fields(item, where, (_known("ssh_host"), _known("ssh_port", int)))
    host, port = proxy["ssh_host"], proxy["ssh_port"]
    if not host or not port:
        return (
            "no SSH endpoint: no direct port for 22/tcp and no proxy host (ssh_host, "
            "ssh_port) yet; wait for it to start, or recreate it with direct ports"
        )
    runtype = CHECK.value(item, where, _known("image_runtype")) or ""
    port += 1 if "jupyter" in runtype else 0
    if not 0 < port < 65536:
        raise CHECK.unexpected(f"{where}.ssh_port", f"not a port: {port}")
    return host, port, "proxy"


def _port(value: object) -> int | None:
    """Return a Docker ``HostPort`` (a string of digits) as a port; None when it is not one."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None
