"""Vast.ai's instance records, checked: the instances podstate can manage, how to reach
each (direct or through Vast's SSH proxy), and why it skips the others.

``parse`` reads the raw ``instances`` the client fetched (``vast_client``): the fields
podstate uses are type-checked, the rest left alone; ``kept`` drops the rest (a template's
``extra_env`` and ``onstart`` may hold a user's tokens) from what is handed on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory.records import Checker, Skipped, shown

# The fields of an instance record that ``parse`` reads: all a listing handed on keeps.
READ = (
    "id", "label", "actual_status", "intended_status", "cur_state", "public_ipaddr", "ports",
    "ssh_host", "ssh_port", "image_runtype", "gpu_name", "num_gpus", "gpu_util", "dph_total",
    "start_date", "verification", "machine_id",
)  # fmt: skip
CHECK = Checker("Vast API", READ, null_is_missing=True)
_unexpected = CHECK.unexpected
kept = CHECK.kept
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

    @property
    def key(self) -> str:
        """Return the instance's key among every provider's pods (``naming.host_names``)."""
        return f"vast:{self.id}"


def parse(raw: list[Any]) -> tuple[list[VastInstance], list[Skipped]]:
    """Return the instances podstate can manage and the ones it skips, in the API's order.

    Manageable: ``actual_status`` running, with an SSH endpoint: the direct one where
    ``ports["22/tcp"]`` has a host port (``public_ipaddr``), else Vast's proxy (``ssh_host``,
    ``ssh_port``, plus one where ``image_runtype`` has ``jupyter``, as Vast's CLI has it).
    Skipped, each with its reason, so that the others are listed: one not running, one
    without an endpoint (a direct port without an address), one whose id two records have.
    InventoryError names the instance and the field of a record that is not one.
    """
    instances: list[VastInstance] = []
    skipped: list[Skipped] = []
    twice = _listed_twice(raw)
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"instances[{index}]"
        if not isinstance(item, dict):
            raise _unexpected(where, f"expected an instance object, got {kind_of(item)}")
        number = _field(item, "id", where, int)
        if number <= 0:
            raise _unexpected(f"{where}.id", f"not an instance id: {number}")
        ident = str(number)
        where = f"{where} (id {ident})"
        label = _field(item, "label", where, str, nullable=True) or None
        name = label or f"C.{ident}"
        created = _created(item, where)
        if ident in twice:
            if ident not in seen:
                skipped.append(Skipped(ident, name, TWICE, created, "vast"))
            seen.add(ident)
            continue
        status = _field(item, "actual_status", where, str, nullable=True)
        why = _not_running(status)
        if why:
            skipped.append(Skipped(ident, name, why, created, "vast"))
            continue
        endpoint = _endpoint(item, where)
        if isinstance(endpoint, str):
            skipped.append(Skipped(ident, name, endpoint, created, "vast"))
            continue
        host, port, kind = endpoint
        gpus = _field(item, "num_gpus", where, int, nullable=True)
        instances.append(
            VastInstance(
                id=ident,
                name=name,
                label=label,
                host=host,
                port=port,
                endpoint=kind,
                gpu_name=_field(item, "gpu_name", where, str, nullable=True) or None,
                gpu_count=gpus or 0,
                gpu_util=_percent(item, "gpu_util", where),
                dph_total=_number(item, "dph_total", where),
                verification=_field(item, "verification", where, str, nullable=True),
                machine_id=_field(item, "machine_id", where, int, nullable=True),
                created_at=created,
            )
        )
    return instances, skipped


def _listed_twice(raw: list[Any]) -> set[str]:
    """Return the ids that more than one record of ``raw`` has: the pages shifted while they
    were read, so which record is the instance as it is now cannot be told."""
    counted: dict[str, int] = {}
    for item in raw:
        number = item.get("id") if isinstance(item, dict) else None
        if isinstance(number, int) and not isinstance(number, bool):
            counted[str(number)] = counted.get(str(number), 0) + 1
    return {ident for ident, count in counted.items() if count > 1}


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
    ports = _field(item, "ports", where, dict, nullable=True) or {}
    mapped = ports.get("22/tcp")
    if mapped:
        if not isinstance(mapped, list) or not isinstance(mapped[0], dict):
            raise _unexpected(
                f"{where}.ports.22/tcp", f"expected a list of host ports, got {kind_of(mapped)}"
            )
        host = (_field(item, "public_ipaddr", where, str, nullable=True) or "").strip()
        port = _port(mapped[0].get("HostPort"))
        if host and port:
            return host, port, "direct"
        missing = "a public_ipaddr" if not host else "a HostPort that is a port"
        return (
            f"a direct port for 22/tcp without {missing}: no address to reach it at yet; "
            "wait for Vast to give one, or recreate the instance"
        )
    host = _field(item, "ssh_host", where, str, nullable=True)
    port = _field(item, "ssh_port", where, int, nullable=True)
    if not host or not port:
        return (
            "no SSH endpoint: no direct port for 22/tcp and no proxy host (ssh_host, "
            "ssh_port) yet; wait for it to start, or recreate it with direct ports"
        )
    runtype = _field(item, "image_runtype", where, str, nullable=True) or ""
    port += 1 if "jupyter" in runtype else 0
    if not 0 < port < 65536:
        raise _unexpected(f"{where}.ssh_port", f"not a port: {port}")
    return host, port, "proxy"


def _port(value: object) -> int | None:
    """Return a Docker ``HostPort`` (a string of digits) as a port; None when it is not one."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None


def _created(item: dict[str, Any], where: str) -> str:
    """Return ``start_date`` (epoch seconds) as RFC 3339; NEVER (newest) when it is null."""
    value = _number(item, "start_date", where)
    if value is None:
        return NEVER
    try:
        return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        raise _unexpected(f"{where}.start_date", f"not a time: {value!r}") from None


def _number(item: dict[str, Any], key: str, where: str) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _unexpected(f"{where}.{key}", f"expected a number or null, got {kind_of(value)}")
    return float(value)


def _percent(item: dict[str, Any], key: str, where: str) -> float | None:
    value = _number(item, key, where)
    if value is not None and not 0 <= value <= 100:
        raise _unexpected(f"{where}.{key}", f"expected a percentage from 0 to 100, got {value:g}")
    return value


def _field(obj: dict[str, Any], key: str, where: str, kind: type, nullable: bool = False) -> Any:
    """Return ``obj[key]`` when it has type ``kind`` (``Checker.field``): missing or null
    only where ``nullable``, as Vast leaves out or nulls what it does not know."""
    return CHECK.field(obj, key, where, kind, required=not nullable, nullable=nullable)
