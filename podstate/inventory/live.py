"""What a provider's API says a pod costs and does now: its price per hour and its live
utilization (RunPod's ``cost`` and ``runtime``; Vast's ``dph_total`` and ``gpu_util``, checked in
``vast_instances``), checked for type and range.

A price or a reading the API does not give is unknown (None), never 0; one it gives in the
wrong shape is an InventoryError naming the pod and the field, one line. Vast's readings
map to the same ``Live`` (``one_utilization``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory.api_http import InventoryError


@dataclass(frozen=True)
class Live:
    """A pod's live utilization as its provider reports it (no SSH): each GPU's use and
    memory use in percent, and the seconds since its container started; None where the
    provider gives no number."""

    gpu_util: tuple[int, ...]  # per GPU, 0-100
    gpu_memory_util: tuple[int | None, ...]  # per GPU, 0-100
    uptime: int | None

    def in_use(self) -> bool | None:
        """Return True when a GPU reads busy or with memory in use, False when every GPU
        reads 0 % and no memory, None when there is no GPU reading (unknown, never idle).
        No memory reading at all (``()``: a provider that gives none, Vast) leaves the
        utilization alone to say it."""
        if not self.gpu_util or None in self.gpu_memory_util:
            return None
        return any(self.gpu_util) or any(m for m in self.gpu_memory_util if m)

    def to_json(self) -> dict[str, Any]:
        """Return the reading as the watch's JSON and state file keep it."""
        return {
            "gpu_util": list(self.gpu_util),
            "gpu_memory_util": list(self.gpu_memory_util),
            "uptime": self.uptime,
        }


def idle(reading: Live) -> bool | None:
    """Return whether the provider's readings say the pod is idle: True when every GPU reads
    0 % and no memory, False when one is in use, None when they cannot say (no GPU reading).
    It is the watch's reading between its full checks (``podstate.watch.idle``)."""
    in_use = reading.in_use()
    return None if in_use is None else not in_use


def one_utilization(util: float | None) -> Live | None:
    """Return the live reading of a provider that gives one GPU utilization for the whole
    instance and no GPU memory reading (Vast's ``gpu_util``, checked by the caller): any
    use above 0 reads in use. None when it gives none (unknown). The watch's full checks
    read the GPUs' memory and processes on the pod; between them this is all there is."""
    if util is None:
        return None
    return Live((math.ceil(util),), (), None)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cost(item: dict[str, Any], where: str) -> float | None:
    """Return RunPod's ``cost`` of a pod record (USD per hour), None when the record has
    none; InventoryError, one line, when it is not a number or is negative."""
    if item.get("cost") is None:
        return None
    value = item["cost"]
    if not _number(value) or value < 0:
        got = f"{value!r}" if _number(value) else kind_of(value)
        raise _unexpected(f"{where}.cost", f"expected a price per hour (a number >= 0), got {got}")
    return float(value)


def percent(value: Any, where: str) -> int | None:
    """Return a utilization in percent, None when absent; InventoryError when it is not a
    number from 0 to 100."""
    if value is None:
        return None
    if not _number(value) or not 0 <= value <= 100:
        got = f"{value!r}" if _number(value) else kind_of(value)
        raise _unexpected(where, f"expected a percentage from 0 to 100, got {got}")
    return int(value)


def runtime(item: dict[str, Any], where: str) -> Live | None:
    """Return the live reading of RunPod's ``runtime`` (None when it is null or missing, as
    for a pod that is not RUNNING: unknown); InventoryError when it is malformed."""
    value = item.get("runtime")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _unexpected(f"{where}.runtime", f"expected an object or null, got {kind_of(value)}")
    gpus = value.get("gpus") or []
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        raise _unexpected(f"{where}.runtime.gpus", "expected a list of objects")
    util: list[int] = []
    memory: list[int | None] = []
    for index, gpu in enumerate(gpus):
        here = f"{where}.runtime.gpus[{index}]"
        reading = percent(gpu.get("util"), f"{here}.util")
        if reading is None:  # no reading of this GPU: the pod's live state is unknown
            return Live((), (), _uptime(value, where))
        util.append(reading)
        memory.append(percent(gpu.get("memoryUtil"), f"{here}.memoryUtil"))
    return Live(tuple(util), tuple(memory), _uptime(value, where))


def _uptime(value: dict[str, Any], where: str) -> int | None:
    uptime = value.get("uptime")
    if uptime is not None and (not isinstance(uptime, int) or isinstance(uptime, bool)):
        raise _unexpected(f"{where}.runtime.uptime", f"expected seconds, got {kind_of(uptime)}")
    return uptime


def _unexpected(where: str, problem: str) -> InventoryError:
    return InventoryError(f"unexpected RunPod API response: {where}: {problem}")
