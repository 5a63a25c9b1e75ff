"""RunPod's pod records, checked: the pods podstate can manage, and why it skips the others.

``parse`` reads the raw ``pods`` list the client fetched (``podstate.inventory.runpod_client``)
through the one record checker (``records.Checker``): the fields podstate uses, declared
here, are type-checked, the rest left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from podstate.inventory import hostkeys
from podstate.inventory import live as readings
from podstate.inventory.podsfile import CLOUDS
from podstate.inventory.records import Checker, Field, Skipped, shown
from podstate.providers.runpod import RUNPOD

__all__ = ["ApiPod", "Skipped", "kept", "parse", "shown"]


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


def _time(value: str) -> str:
    """Return ``value`` when it is an RFC 3339 date-time; ValueError otherwise."""
    try:
        hostkeys.parse_time(value)
    except ValueError:
        raise ValueError(f"not a date-time: {shown(value)}") from None
    return value


def _id(value: str) -> str:
    if not value:
        raise ValueError("empty")
    return value


# The fields of a pod record podstate reads, in the order they are checked: every pod's;
# a RUNNING one's SSH; a pod's with direct SSH: its address, then the rest.
HEAD = (Field("name"), Field("status"), Field("createdAt", read=_time))
SSH = (Field("ssh", dict), Field("ssh.direct", dict, nullable=True))
ADDRESS = (Field("host"), Field("port", int), Field("username"))
POD = (
    Field("cloud"),
    Field("gpu", dict, required=False),
    Field("gpu.id"),
    Field("gpu.count", int, required=False),
    Field("startedAt", nullable=True, read=_time),
    Field("dataCenterId", nullable=True),
)
# All a listing handed on needs to keep: those, and what ``live`` and the skips read.
READ = (
    "id", "name", "status", "createdAt", "cluster", "ssh", "ports", "cloud", "gpu", "startedAt",
    "dataCenterId", "cost", "runtime",
)  # fmt: skip
CHECK = Checker(
    RUNPOD.shown,
    READ,
    "pods",
    "a pod object",
    RUNPOD.name,
    Field("id", read=_id),
    HEAD,
    lambda pod_id, head: (head["name"], head["createdAt"]),  # its name, when it was made
)
kept = CHECK.kept


def parse(raw: list[Any], include_cluster: bool = False) -> tuple[list[ApiPod], list[Skipped]]:
    """Return the pods podstate can manage and the ones it skips, in the API's order.

    Manageable: RUNNING, with ``ssh.direct``, and not a cluster member unless
    ``include_cluster``. The fields podstate reads are type-checked (InventoryError names
    the pod and field); other fields are left alone.
    """
    return CHECK.parse(
        raw, lambda item, where, pod_id, head: _pod(item, where, pod_id, head, include_cluster)
    )


def _pod(
    item: dict[str, Any], where: str, pod_id: str, head: dict[str, Any], include_cluster: bool
) -> ApiPod | str:
    """Return the pod a checked record is, or why it is skipped."""
    cluster = item.get("cluster")
    if cluster is not None and not include_cluster:
        cluster_id = cluster.get("id") if isinstance(cluster, dict) else None
        which = f" {shown(cluster_id)}" if isinstance(cluster_id, str) else ""
        return f"member of cluster{which} (set PODSTATE_CLUSTER_PODS=1 to manage it)"
    if head["status"] != "RUNNING":
        return f"status {shown(head['status'])}"
    direct = CHECK.fields(item, where, SSH)["ssh.direct"]
    if direct is None:
        return _no_direct_reason(item)
    here = f"{where}.ssh.direct"
    host, port, user = CHECK.fields(direct, here, ADDRESS).values()
    if not host or not user or not 0 < port < 65536:
        bad = "host" if not host else "username" if not user else "port"
        raise CHECK.unexpected(f"{here}.{bad}", f"not usable: {shown(str(direct.get(bad)))}")
    pod = CHECK.fields(item, where, POD)
    cloud = pod["cloud"].upper()
    gpu_id = pod["gpu.id"]
    return ApiPod(
        id=pod_id,
        name=head["name"],
        host=host,
        port=port,
        user=user,
        cloud=cloud if cloud in CLOUDS else "COMMUNITY",
        gpu_id=gpu_id,
        gpu_count=(1 if pod["gpu.count"] is None else pod["gpu.count"]) if gpu_id else 0,
        data_center=pod["dataCenterId"],
        started_at=pod["startedAt"],
        created_at=head["createdAt"],
        cost_per_hour=readings.cost(item, where),
        live=readings.runtime(item, where),
    )


def _no_direct_reason(item: dict[str, Any]) -> str:
    ports = item.get("ports")
    if isinstance(ports, list) and "22/tcp" not in ports:
        return (
            "no direct SSH: 22/tcp is not exposed (the ssh.runpod.io proxy gives an "
            "interactive shell only; expose 22/tcp as a TCP port)"
        )
    return "no direct SSH: 22/tcp has no public port yet (no public IP, or still starting)"
