"""What sandbox pods look like: the shapes they cycle through, and their GPUs.

A shape is a RunPod pod's cloud, GPUs, /dev/shm size, /workspace kind and privileges.
``gpu_layout`` writes what the pod's nvidia-smi stand-in answers from.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from podstate.sizes import parse_mount_size


@dataclass(frozen=True)
class Shape:
    """What a pod looks like: cloud, GPUs, /dev/shm size, /workspace kind, privileges."""

    cloud: str  # "COMMUNITY" or "SECURE"
    gpus: int  # 0: no nvidia-smi at all
    gpu_name: str | None
    gpu_memory_mib: int
    link: str | None  # between every pair of GPUs: "PHB" (PCIe) or "NV<n>" (NVLink)
    shm: str  # /dev/shm tmpfs size, as mount(8) takes it
    workspace: str  # "sshfs" (network volume) or "local"
    privileged: bool  # keeps CAP_SYS_ADMIN (mounts work inside the pod)
    provider: str = "runpod"  # "vast": a Vast.ai instance (``VAST_SHAPES``)
    endpoint: str = "direct"  # a Vast instance's SSH as its API lists it: direct or proxy

    @property
    def nvlink(self) -> bool:
        """True when the GPUs talk over NVLink."""
        return bool(self.link and self.link.startswith("NV"))

    @property
    def data_center(self) -> str:
        """Return the RunPod data centre id the pod reports (``RUNPOD_DC_ID``, ``dataCenterId``)."""
        return "EU-RO-1" if self.cloud == "SECURE" else "CA-MTL-1"

    @property
    def cost_per_hour(self) -> float:
        """Return what RunPod would charge for the pod, USD per hour (the sandbox API's
        ``cost`` while it runs): its GPUs at their cloud's price, or a CPU pod's."""
        if not self.gpus or self.gpu_name is None:
            return CPU_PRICE
        return round(self.gpus * GPU_PRICES[(self.cloud, self.gpu_name)], 2)

    @property
    def shm_bytes(self) -> int:
        """Return the /dev/shm size in bytes, as df and statfs report it."""
        return parse_mount_size(self.shm)

    def __str__(self) -> str:
        if self.gpus:
            link = f", {self.link}" if self.gpus > 1 else ""
            gpus = f"{self.gpus}x {self.gpu_name}{link}"
        else:
            gpus = "no GPU"
        extra = ", privileged" if self.privileged else ""
        if self.provider == "vast":
            return f"Vast ({self.endpoint}), {gpus}, /dev/shm {self.shm}{extra}"
        return f"{self.cloud}, {gpus}, /dev/shm {self.shm}, /workspace {self.workspace}{extra}"


# The CUDA version the stand-in nvidia-smi reports (and the sandbox API's ``cudaVersion``).
CUDA_VERSION = "12.4"
_RTX4090 = ("NVIDIA GeForce RTX 4090", 24564)
_H100 = ("NVIDIA H100 80GB HBM3", 81559)

# USD per GPU and hour, as RunPod's price list has them (the sandbox API's ``cost``).
GPU_PRICES = {
    ("COMMUNITY", _RTX4090[0]): 0.34,
    ("SECURE", _H100[0]): 2.99,
    ("COMMUNITY", _H100[0]): 2.69,
}
CPU_PRICE = 0.06  # a 2 vCPU pod

SHAPES: list[Shape] = [
    Shape("COMMUNITY", 2, *_RTX4090, "PHB", "24G", "sshfs", False),
    Shape("SECURE", 8, *_H100, "NV18", "32G", "local", False),
    Shape("COMMUNITY", 1, *_RTX4090, None, "64M", "sshfs", False),
    Shape("COMMUNITY", 2, *_H100, "NV4", "8G", "local", True),
    Shape("SECURE", 0, None, 0, None, "20G", "sshfs", False),
]
# Vast.ai instances (``up(vast=N)``): community hosts whose /dev/shm follows the GPU share,
# one reached directly, one through Vast's SSH proxy; they cycle.
_RTX3090 = ("RTX 3090", 24576)
VAST_SHAPES: list[Shape] = [
    Shape("COMMUNITY", 2, "RTX 4090", 24564, "PHB", "16G", "local", False, "vast", "direct"),
    Shape("COMMUNITY", 1, *_RTX3090, None, "64M", "local", False, "vast", "proxy"),
]
# Pods past the fifth cycle through these (so pod-3 stays the only 64 MiB /dev/shm pod).
_CYCLE = (0, 1, 3, 4)


def shape_for(number: int) -> Shape:
    """Return the shape of pod-<number> (numbers start at 1)."""
    if number < 1:
        raise ValueError("pod numbers start at 1")
    if number <= len(SHAPES):
        return SHAPES[number - 1]
    return SHAPES[_CYCLE[(number - len(SHAPES) - 1) % len(_CYCLE)]]


def shape_of(record: dict[str, Any]) -> Shape:
    """Return the shape of a sandbox pod's record (pods.json): a Vast instance's by its
    ``vast`` number, else ``shape_for`` its number."""
    if record.get("vast"):
        number: int = record["vast"]
        return VAST_SHAPES[(number - 1) % len(VAST_SHAPES)]
    return shape_for(record["number"])


def gpu_layout(name: str, shape: Shape, delay: float = 0) -> str:
    """Return the nvidia-smi stand-in's layout file for a pod whose every nvidia-smi call takes
    ``delay`` seconds."""
    if shape.nvlink:
        buses = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    else:
        buses = ["01", "21", "41", "61", "81", "A1", "C1", "E1"]
    lines = []
    for index in range(shape.gpus):
        gpu_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"podstate-sandbox/{name}/gpu{index}")
        # Eight-GPU boxes split their GPUs over two NUMA nodes, as HGX H100 servers do.
        numa = 1 if shape.gpus == 8 and index >= 4 else 0
        affinity = ("0-51,104-155", "52-103,156-207")[numa] if shape.gpus == 8 else "0-31"
        lines.append(
            f"gpu|{index}|{shape.gpu_name}|GPU-{gpu_uuid}|{shape.gpu_memory_mib}|"
            f"00000000:{buses[index % len(buses)]}:00.0|{affinity}|{numa}"
        )
    lines.append(f"link|{shape.link or 'PHB'}")
    lines.append("driver|550.127.05")
    lines.append(f"cuda|{CUDA_VERSION}")
    if delay:
        lines.append(f"delay|{delay:g}")
    return "\n".join(lines) + "\n"


# What a bad GPU host looks like to the stand-in nvidia-smi: lines for a pod's layout file
# (read on every call, so a running pod turns bad at once). Each names the first GPU it
# spoils as GPU {index}; see podstate/sandbox/files/nvidia-smi for the fields.
GPU_FAULTS = {
    # hardware thermal slowdown at 91 °C
    "thermal": "health|{index}|91|Enabled|0|No|No|Not Active|Active|Not Active|Not Active|16|16",
    # two uncorrected volatile ECC errors
    "ecc": "health|{index}|45|Enabled|2|No|No|Not Active|Not Active|Not Active|Not Active|16|16",
    # PCIe link trained at x8 of x16 (a bad riser)
    "pcie": "health|{index}|45|Enabled|0|No|No|Not Active|Not Active|Not Active|Not Active|8|16",
    # a driver too old for current CUDA images
    "old-driver": "driver|535.54.03",
    # after a host driver update: every nvidia-smi call fails
    "nvml-mismatch": "fail|18|Failed to initialize NVML: Driver/library version mismatch",
    # NVML cannot start at all (the container lost its GPU devices): every call fails
    "nvml-unknown": "fail|255|Failed to initialize NVML: Unknown Error",
    # a release that no longer knows a field the probe asks (releases rename fields;
    # clocks_throttle_reasons.* are aliases of clocks_event_reasons.* for now)
    "unknown-field": "reject|clocks_throttle_reasons.hw_slowdown",
}
NO_GPUS = "no-gpus"  # a pod that came back from a restart with no GPUs listed
GPU_LAYOUT = "/usr/local/share/nvidia-smi-standin/layout"  # in each pod
NVIDIA_SMI_CALLS = "/run/podstate-sandbox/nvidia-smi.calls"  # each call's arguments, in each pod


def gpu_readings(layout: str) -> list[tuple[int, int]]:
    """Return each GPU's utilization (percent) and memory in use (percent of its memory), in
    index order, from a pod's layout file: its ``util`` line (percent, MiB in use) plus the
    memory of its ``app`` lines (compute processes); see the stand-in nvidia-smi."""
    total: dict[int, int] = {}
    util: dict[int, int] = {}
    used: dict[int, int] = {}
    for line in layout.splitlines():
        kind, *fields = line.split("|")
        if kind == "gpu":
            total[int(fields[0])] = int(fields[3])
        elif kind == "util":
            util[int(fields[0])] = int(fields[1])
            used[int(fields[0])] = used.get(int(fields[0]), 0) + int(fields[2])
        elif kind == "app":
            used[int(fields[0])] = used.get(int(fields[0]), 0) + int(fields[3])
    return [
        (util.get(i, 0), min(100, round(100 * used.get(i, 0) / (total[i] or 1))))
        for i in sorted(total)
    ]


def gpu_busy_command(index: int, percent: int, memory_mib: int) -> str:
    """Return the sh command that makes GPU ``index`` of a running pod read ``percent`` %
    utilization with ``memory_mib`` MiB in use (a later call replaces an earlier one)."""
    line = f"util|{index}|{percent}|{memory_mib}"
    return f"sed -i '/^util|{index}|/d' {GPU_LAYOUT} && echo '{line}' >> {GPU_LAYOUT}"


def compute_app_command(index: int, pid: int, name: str, memory_mib: int) -> str:
    """Return the sh command that gives GPU ``index`` of a running pod a compute process
    (``pid``, ``name``: no ``|`` or quote) holding ``memory_mib`` MiB, as
    ``nvidia-smi --query-compute-apps`` lists it."""
    return f"echo 'app|{index}|{pid}|{name}|{memory_mib}' >> {GPU_LAYOUT}"


def gpu_fault_command(fault: str, index: int = 0) -> str:
    """Return the sh command that gives a running pod the GPU ``fault`` (a GPU_FAULTS name or
    NO_GPUS), on GPU ``index`` where the fault is one GPU's."""
    if fault == NO_GPUS:
        return f"sed -i '/^gpu|/d; /^health|/d' {GPU_LAYOUT}"
    line = GPU_FAULTS[fault].format(index=index)
    if line.startswith("driver|"):
        return f"sed -i 's/^driver|.*/{line}/' {GPU_LAYOUT}"
    return f"echo '{line}' >> {GPU_LAYOUT}"
