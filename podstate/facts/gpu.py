"""The probe's GPU section: one nvidia-smi query, started first and read beside the rest.

scripts/gpu_state.sh runs the query, and keeps the topology and CUDA version in
``GPU_CACHE`` on the container disk once a probe of this container has read them.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from typing import Any

from podstate.facts.decode import by_key, decode
from podstate.facts.section import Answer, Section
from podstate.paths import GPU_CACHE
from podstate.shell import script

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What the probe asks nvidia-smi about each GPU, in one query: each field, and the GpuDevice
# attribute it fills. Releases rename fields (clocks_throttle_reasons.* are aliases of
# clocks_event_reasons.* for now); a field the pod's release does not know is asked without,
# and only its reading is unknown (GpuState.unknown).
GPU_FIELDS = {
    "index": "index",
    "name": "name",
    "memory.total": "memory_mib",
    "driver_version": "driver",
    "temperature.gpu": "temperature",
    "ecc.mode.current": "ecc_mode",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected",
    "retired_pages.pending": "retired_pending",
    "remapped_rows.pending": "remap_pending",
    "clocks_throttle_reasons.hw_slowdown": "hw_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown": "hw_thermal",
    "clocks_throttle_reasons.sw_thermal_slowdown": "sw_thermal",
    "clocks_throttle_reasons.hw_power_brake_slowdown": "power_brake",
    "pcie.link.width.current": "link_width",
    "pcie.link.width.max": "link_width_max",
    # whether the GPU is in use now (podstate.facts.activity): last, so a probe's answer from
    # before they were asked reads as this one with them unknown
    "uuid": "uuid",
    "utilization.gpu": "utilization",
    "memory.used": "memory_used_mib",
}
_NUMBERS = {
    "memory_mib",
    "temperature",
    "ecc_uncorrected",
    "link_width",
    "link_width_max",
    "utilization",
    "memory_used_mib",
}
# The compute processes, asked only when a GPU's memory in use is above IDLE_MEMORY_MIB or
# unknown: a CUDA context alone takes hundreds of MiB, so a GPU at or below it runs none,
# and an idle pod costs one nvidia-smi call, as before.
APPS_FIELDS = "gpu_uuid,pid,process_name,used_memory"
IDLE_MEMORY_MIB = 64


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as ``nvidia-smi --query-gpu`` reads it; None where it says N/A, or where the
    pod's nvidia-smi does not know the field (GpuState.unknown says which)."""

    index: int
    name: str = ""
    memory_mib: int | None = None
    driver: str = ""
    temperature: int | None = None
    ecc_mode: str | None = None  # "Enabled" | "Disabled"; None without ECC
    ecc_uncorrected: int | None = None  # volatile uncorrected ECC errors
    retired_pending: str | None = None  # "Yes" | "No"
    remap_pending: str | None = None  # "Yes" | "No"
    hw_slowdown: str | None = None  # "Active" | "Not Active"
    hw_thermal: str | None = None
    sw_thermal: str | None = None
    power_brake: str | None = None
    link_width: int | None = None
    link_width_max: int | None = None
    uuid: str | None = None
    utilization: int | None = None  # percent of the last sample period a kernel ran
    memory_used_mib: int | None = None


@dataclass(frozen=True)
class ComputeApp:
    """A process using a GPU, as ``nvidia-smi --query-compute-apps`` lists it."""

    gpu_uuid: str
    pid: int | None
    name: str
    memory_mib: int | None


@dataclass(frozen=True)
class GpuState:
    """What the pod's GPUs are, or why that is unknown."""

    readable: bool  # False: nvidia-smi is there but failed; everything else is unknown
    error: str | None = None  # its message, when not readable
    present: bool = True  # nvidia-smi is on the pod (False: a CPU pod)
    devices: tuple[GpuDevice, ...] = ()
    cuda: str | None = None  # the highest CUDA version the driver supports
    unknown: tuple[str, ...] = ()  # fields of GPU_FIELDS this nvidia-smi rejects: unknown
    # the compute processes: () when no GPU has memory in use (none can run), None when
    # they could not be read
    apps: tuple[ComputeApp, ...] | None = ()


def _na(value: str) -> str | None:
    return None if value.strip().strip("[]") in ("N/A", "Not Supported", "") else value.strip()


def _int(value: str) -> int | None:
    value = _na(value) or ""
    return int(float(value)) if value.replace(".", "", 1).isdigit() else None


def parse_gpu_query(
    text: str, fields: tuple[str, ...] = tuple(GPU_FIELDS)
) -> tuple[GpuDevice, ...]:
    """Return the GPUs of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``,
    ``fields`` being those of GPU_FIELDS the query asked, in order; a GPU without ``index``
    has its row's number."""
    devices = []
    rows = [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]
    for number, row in enumerate(rows):
        if len(row) != len(fields):
            raise ValueError(f"nvidia-smi answered {len(row)} fields, not {len(fields)}")
        values: dict[str, Any] = {"index": number}
        for field, cell in zip(fields, row, strict=True):
            attribute, cell = GPU_FIELDS[field], cell.strip()
            if attribute == "index":
                values[attribute] = int(cell)
            elif attribute in ("name", "driver"):
                values[attribute] = cell
            else:
                values[attribute] = _int(cell) if attribute in _NUMBERS else _na(cell)
        if values.get("utilization") is not None and not 0 <= values["utilization"] <= 100:
            values["utilization"] = None  # not a share of time: unknown, never idle
        devices.append(GpuDevice(**values))
    return tuple(devices)


def parse_apps(status: str, text: str) -> tuple[ComputeApp, ...] | None:
    """Return the compute processes of ``nvidia-smi --query-compute-apps=<APPS_FIELDS>``
    (csv, no header, no units) that exited with ``status``; None when it failed."""
    if status != "0":
        return None
    apps = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) == 4:
            uuid, pid, name, memory = (cell.strip() for cell in row)
            apps.append(ComputeApp(uuid, _int(pid), name, _int(memory)))
        elif row:
            return None
    return tuple(apps)


def parse_cuda_version(header: str) -> str | None:
    """Return the "CUDA Version" of plain ``nvidia-smi`` output's header, if it shows one."""
    match = re.search(r"CUDA Version:\s*([0-9.]+)", header)
    return match[1] if match else None


def parse_gpu(fields: dict[str, str]) -> GpuState:
    """Return the GPU state from the probe's ``gpu.*`` lines (absent: a pod without GPUs)."""
    if "query" not in fields:
        return GpuState(readable=True, present=False)
    unknown = tuple(fields["unknown"].split(",")) if fields.get("unknown") else ()
    if not set(unknown) <= set(GPU_FIELDS):
        raise ValueError(f"nvidia-smi fields not asked: {fields['unknown']}")
    status, _, data = fields["query"].partition(" ")
    text = decode(data)
    if status != "0":
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        why = lines[0] if lines else f"no output (exit status {status})"
        if status == "124":
            why = "nvidia-smi did not answer within 20 s"
        return GpuState(readable=False, error=why, unknown=unknown)
    apps: tuple[ComputeApp, ...] | None = ()
    if "apps" in fields:
        apps_status, _, apps_data = fields["apps"].partition(" ")
        apps = parse_apps(apps_status, decode(apps_data))
    return GpuState(
        readable=True,
        devices=parse_gpu_query(text, tuple(f for f in GPU_FIELDS if f not in unknown)),
        cuda=parse_cuda_version(decode(fields.get("header", ""))),
        unknown=unknown,
        apps=apps,
    )


def parse_gpu_list(text: str) -> list[str]:
    """Return the GPU names in ``nvidia-smi -L`` output (``GPU 0: NAME (UUID: …)``)."""
    names = []
    for line in text.splitlines():
        if line.startswith("GPU ") and ":" in line:
            names.append(line.split(":", 1)[1].split(" (UUID")[0].strip())
    return names


def parse_topology(text: str) -> dict[tuple[int, int], str]:
    """Return the GPU-to-GPU links of ``nvidia-smi topo -m``: {(i, j): "NV12" | "PHB" | …}.

    Only the GPU columns are read; NIC columns, affinities and the legend are skipped.
    """
    # nvidia-smi underlines the header row with ANSI escapes, even into a pipe.
    lines = [line for line in _ANSI.sub("", text).splitlines() if line.strip()]
    if not lines:
        return {}
    header = lines[0].split("\t")
    columns = {
        i: int(name[3:])
        for i, name in enumerate(header)
        if name.strip().startswith("GPU") and name.strip()[3:].isdigit()
    }
    links: dict[tuple[int, int], str] = {}
    for line in lines[1:]:
        cells = line.split("\t")
        row = cells[0].strip()
        if not (row.startswith("GPU") and row[3:].isdigit()):
            continue
        for index, gpu in columns.items():
            if index < len(cells):
                links[(int(row[3:]), gpu)] = cells[index].strip()
    return links


def all_nvlink(links: dict[tuple[int, int], str], count: int) -> bool:
    """True when every pair of the ``count`` GPUs is joined by NVLink (``NV#``)."""
    pairs = [(i, j) for i in range(count) for j in range(count) if i != j]
    return bool(pairs) and all(links.get(p, "").startswith("NV") for p in pairs)


def start_lines() -> list[str]:
    """Return the lines that start reading the GPUs beside everything else (nvidia-smi can
    take seconds): their lines come out at the end (``END``). The rest of the probe keeps
    its stdin. The probe closes the group they open ("}") after ``END``."""
    return [
        script("gpu_state.sh"),
        "exec 4<&0",
        f"gpu_state {','.join(GPU_FIELDS)} {GPU_CACHE} {IDLE_MEMORY_MIB} {APPS_FIELDS}"
        " </dev/null | { exec 5<&0 <&4 4<&-",
    ]


# Copies out the GPUs' lines, which ``start_lines`` began, at the probe's end: before its
# values are sent (scripts/enc.sh's spool_end) and ``start_lines``'s group is closed.
END = "gpu_end <&5"


def parse(output: list[str], topology: str) -> tuple[GpuState, list[str], bool]:
    """Return the GPU state from the probe's ``gpu.*`` lines, the GPUs' names, and whether
    every pair of them is on NVLink (from the ``topo`` line's value ``topology``)."""
    gpu = parse_gpu(by_key(output))
    names = [device.name for device in gpu.devices]
    return gpu, names, all_nvlink(parse_topology(decode(topology)), len(names))


def _gpus(answer: Answer) -> dict[str, object]:
    """Return the ``Probe`` fields of the ``gpu.*`` and ``topo`` lines."""
    state, names, nvlink = parse(answer.lines("gpu"), answer.value("topo") or "")
    return {"gpu": state, "gpus": tuple(names), "nvlink": nvlink}


SECTION = Section(
    "gpu",
    fields=("gpu", "gpus", "nvlink"),
    parse=_gpus,
    start=lambda arguments: start_lines(),
    end=lambda arguments: (END,),
)
