"""RunPod's pod records, checked: the pods podstate can manage, and why it skips the others.

``parse`` reads the raw ``pods`` list the client fetched (``podstate.inventory.runpod_client``): the
fields podstate uses are type-checked, the rest left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory import hostkeys
from podstate.inventory import live as readings
from podstate.inventory.podsfile import CLOUDS
from podstate.inventory.records import Checker, Skipped, shown

__all__ = ["ApiPod", "Skipped", "kept", "parse", "shown"]

# The fields of a pod record that ``parse`` reads: all a listing handed on needs to keep.
READ = (
    "id",
    "name",
    "status",
    "createdAt",
    "cluster",
    "ssh",
    "ports",
    "cloud",
    "gpu",
    "startedAt",
    "dataCenterId",
    "cost",
    "runtime",
)
CHECK = Checker("RunPod API", READ)
_field = CHECK.field
_unexpected = CHECK.unexpected
kept = CHECK.kept


@dataclass(frozen=True)
class ApiPod:
    """The parts of a RunPod pod the inventory uses, checked for type."""

    id: str
    name: str
    host: str
    port: int
    user: str
    cloud: str  # SECURE or COMMUNITY
    gpu_id: str | None
    gpu_count: int
    data_center: str | None
    started_at: str | None
    created_at: str  # RunPod's createdAt: who keeps a shared name (naming.host_names)
    cost_per_hour: float | None = None  # RunPod's cost, USD; None: not given (unknown)
    live: readings.Live | None = None  # RunPod's runtime; None: not given (unknown)

    @property
    def key(self) -> str:
        """Return the pod's key among every provider's pods (``naming.host_names``)."""
        return self.id


def parse(raw: list[Any], include_cluster: bool = False) -> tuple[list[ApiPod], list[Skipped]]:
    """Return the pods podstate can manage and the ones it skips, in the API's order.

    Manageable: RUNNING, with ``ssh.direct``, and not a cluster member unless
    ``include_cluster``. The fields podstate reads are type-checked (InventoryError names
    the pod and field); other fields are left alone.
    """
    pods: list[ApiPod] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"pods[{index}]"
        if not isinstance(item, dict):
            raise _unexpected(where, f"expected a pod object, got {kind_of(item)}")
        pod_id = _field(item, "id", where, str)
        if not pod_id:
            raise _unexpected(f"{where}.id", "empty")
        if pod_id in seen:
            raise _unexpected(f"{where}.id", f"{shown(pod_id)} is listed twice")
        seen.add(pod_id)
        where = f"{where} (id {shown(pod_id)})"
        name = _field(item, "name", where, str)
        status = _field(item, "status", where, str)
        created_at = _time(item, "createdAt", where)
        cluster = item.get("cluster")
        if cluster is not None and not include_cluster:
            cluster_id = cluster.get("id") if isinstance(cluster, dict) else None
            which = f" {shown(cluster_id)}" if isinstance(cluster_id, str) else ""
            skipped.append(
                Skipped(
                    pod_id,
                    name,
                    f"member of cluster{which} (set PODSTATE_CLUSTER_PODS=1 to manage it)",
                    created_at,
                )
            )
            continue
        if status != "RUNNING":
            skipped.append(Skipped(pod_id, name, f"status {shown(status)}", created_at))
            continue
        ssh = _field(item, "ssh", where, dict)
        direct = _field(ssh, "direct", f"{where}.ssh", dict, nullable=True)
        if direct is None:
            skipped.append(Skipped(pod_id, name, _no_direct_reason(item), created_at))
            continue
        here = f"{where}.ssh.direct"
        host = _field(direct, "host", here, str)
        port = _field(direct, "port", here, int)
        user = _field(direct, "username", here, str)
        if not host or not user or not 0 < port < 65536:
            bad = "host" if not host else "username" if not user else "port"
            raise _unexpected(f"{here}.{bad}", f"not usable: {shown(str(direct.get(bad)))}")
        cloud = str(_field(item, "cloud", where, str)).upper()
        gpu = _field(item, "gpu", where, dict, required=False)
        gpu_id = gpu_count = None
        if gpu is not None:
            gpu_id = _field(gpu, "id", f"{where}.gpu", str)
            gpu_count = _field(gpu, "count", f"{where}.gpu", int, required=False)
        started_at = _time(item, "startedAt", where, nullable=True)
        pods.append(
            ApiPod(
                id=pod_id,
                name=name,
                host=host,
                port=port,
                user=user,
                cloud=cloud if cloud in CLOUDS else "COMMUNITY",
                gpu_id=gpu_id,
                gpu_count=(1 if gpu_count is None else gpu_count) if gpu_id else 0,
                data_center=_field(item, "dataCenterId", where, str, nullable=True),
                started_at=started_at,
                created_at=created_at,
                cost_per_hour=readings.cost(item, where),
                live=readings.runtime(item, where),
            )
        )
    return pods, skipped


def _time(item: dict[str, Any], key: str, where: str, nullable: bool = False) -> Any:
    """Return ``item[key]``, an RFC 3339 date-time (or None where ``nullable``);
    InventoryError naming it otherwise."""
    value = _field(item, key, where, str, nullable=nullable)
    if value is not None:
        try:
            hostkeys.parse_time(value)
        except ValueError:
            raise _unexpected(f"{where}.{key}", f"not a date-time: {shown(value)}") from None
    return value


def _no_direct_reason(item: dict[str, Any]) -> str:
    ports = item.get("ports")
    if isinstance(ports, list) and "22/tcp" not in ports:
        return (
            "no direct SSH: 22/tcp is not exposed (the ssh.runpod.io proxy gives an "
            "interactive shell only; expose 22/tcp as a TCP port)"
        )
    return "no direct SSH: 22/tcp has no public port yet (no public IP, or still starting)"
