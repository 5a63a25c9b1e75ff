"""GPU fitness: the GPUs a pod must have, and their health, read by the one probe.

A rented host can be bad: throttling under load, a GPU lost after a restart, a driver too
old for the image's CUDA. Each unmet requirement is a violation with its reading, its
threshold and what to do. An ``nvidia-smi`` that is there but fails leaves the GPU state
unknown: that is a violation too (``gpu.unreadable``), never "0 GPUs". A field the pod's
``nvidia-smi`` does not know leaves only its reading unknown: a requirement that needs it is
a violation saying so, never met.
"""

from __future__ import annotations

import fnmatch

from podstate.desired.state import Gpu, State
from podstate.facts.gpu import GPU_FIELDS, GpuDevice, GpuState
from podstate.facts.probe import Probe
from podstate.facts.request import Request
from podstate.run import findings
from podstate.run.role import role
from podstate.sizes import format_size

RECREATE = "recreate the pod on another host"
# nvidia-smi lists a little less memory than a GPU is sold with (an H100 80GB: 81559 MiB, not
# 81920), so a GPU meets min_memory from 97% of it.
MEMORY_SLACK = 0.97
# The nvidia-smi fields (podstate.facts.gpu.GPU_FIELDS) each requirement reads.
NEEDS = {
    "model": ("name",),
    "min_memory": ("memory.total",),
    "min_driver": ("driver_version",),
    "max_temperature": ("temperature.gpu",),
    "healthy": tuple(
        f for f in GPU_FIELDS if f.startswith(("ecc.", "retired", "remapped", "clocks", "pcie."))
    ),
}


def reads(wanted: State) -> Request:  # the roles' contract
    """Return what the probe reads for this role: nothing more than it always reads (the
    GPUs)."""
    return Request()


def version(text: str) -> tuple[int, ...]:
    """Return a dotted version as a tuple of numbers, for comparing (``550.54.15``)."""
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def health_problems(device: GpuDevice) -> list[str]:
    """Return what is wrong with one GPU's health, each with its reading and what to do."""
    gpu = f"GPU {device.index} ({device.name})"
    temperature = f" at {device.temperature} °C" if device.temperature is not None else ""
    problems = []
    if device.ecc_mode == "Enabled" and device.ecc_uncorrected:
        problems.append(
            f"{gpu}: {device.ecc_uncorrected} uncorrected ECC error(s) since the driver "
            f"loaded: its memory is failing; {RECREATE}"
        )
    for pending, what in (
        (device.retired_pending, "page retirement"),
        (device.remap_pending, "row remapping"),
    ):
        if pending == "Yes":
            problems.append(
                f"{gpu}: {what} pending: the GPU needs a reset the pod cannot do; {RECREATE}"
            )
    for state, what in (
        (device.hw_slowdown, "hardware slowdown"),
        (device.hw_thermal, "hardware thermal slowdown"),
        (device.sw_thermal, "software thermal slowdown"),
        (device.power_brake, "power brake slowdown"),
    ):
        if state == "Active":
            problems.append(
                f"{gpu}: {what} active{temperature}: the host is throttling; {RECREATE}"
            )
    if device.link_width and device.link_width_max and device.link_width < device.link_width_max:
        problems.append(
            f"{gpu}: PCIe link at x{device.link_width} of x{device.link_width_max}: host "
            f"transfers run at a fraction of their speed (a bad riser or slot); {RECREATE}"
        )
    return problems


def unknown_readings(requirement: str, gpu: GpuState) -> str | None:
    """Return why ``requirement`` cannot be checked (the fields it reads that the pod's
    nvidia-smi rejects), or None when every reading it needs is there."""
    fields = [f for f in NEEDS.get(requirement, ()) if f in gpu.unknown]
    if not fields:
        return None
    what = "the field" if len(fields) == 1 else "the fields"
    return (
        f"this pod's nvidia-smi does not know {what} {', '.join(fields)} (its release lacks or "
        f"renamed it), so that reading is unknown and gpu.{requirement} cannot be checked; "
        f"{RECREATE}, or waive gpu.{requirement} for this pod"
    )


def check(wanted: Gpu, gpu: GpuState) -> list[tuple[str, str]]:
    """Return the violations (finding id, message) of the GPUs against ``wanted``; a
    requirement whose readings are unknown is one too, saying which."""
    if not gpu.readable:
        return [
            (
                "gpu.unreadable",
                f"nvidia-smi fails on this pod ({gpu.error}): the GPU state is unknown, so "
                "podstate drops no NCCL guard and counts the GPU topology as unsafe (with "
                "nccl.p2p auto, a COMMUNITY pod gets NCCL_P2P_DISABLE=1); restart the pod, or "
                f"if it persists (a host driver update), {RECREATE}",
            )
        ]
    found: list[tuple[str, str]] = []
    unknown = {key: unknown_readings(key, gpu) for key in NEEDS if getattr(wanted, key) is not None}
    for key, why in unknown.items():
        if why and key != "healthy":
            found.append((f"gpu.{key}", why))
    devices = gpu.devices
    count = wanted.count
    if count is not None and len(devices) != count:
        cpu = "" if gpu.present else " (nvidia-smi is not on the pod: a CPU pod)"
        found.append(
            ("gpu.count", f"the pod has {len(devices)} GPU(s){cpu}, not {count}: {RECREATE}")
        )
    model = None if unknown.get("model") else wanted.model
    odd = [d for d in devices if model and not fnmatch.fnmatch(d.name, model)]
    if odd:
        names = ", ".join(f"GPU {d.index} is {d.name}" for d in odd)
        found.append(("gpu.model", f"{names}, not {model}: {RECREATE}"))
    memory = None if unknown.get("min_memory") else wanted.min_memory
    small = [d for d in devices if memory and (d.memory_mib or 0) << 20 < memory * MEMORY_SLACK]
    if memory and small:
        sizes = ", ".join(
            f"GPU {d.index} has {format_size((d.memory_mib or 0) << 20)}" for d in small
        )
        found.append(("gpu.min_memory", f"{sizes}, less than {format_size(memory)}: {RECREATE}"))
    driver = None if unknown.get("min_driver") else wanted.min_driver
    if driver and devices and version(devices[0].driver) < version(driver):
        found.append(
            (
                "gpu.min_driver",
                f"the NVIDIA driver is {devices[0].driver}, older than {driver}: the image's "
                f"CUDA may not run; {RECREATE} with a newer driver",
            )
        )
    cuda = wanted.min_cuda
    if cuda and devices and (gpu.cuda is None or version(gpu.cuda) < version(cuda)):
        have = (
            f"supports CUDA up to {gpu.cuda}" if gpu.cuda else "does not say which CUDA it supports"
        )
        found.append(("gpu.min_cuda", f"the driver {have}, below {cuda}: {RECREATE}"))
    hot = None if unknown.get("max_temperature") else wanted.max_temperature
    for d in devices:
        if hot is not None and d.temperature is not None and d.temperature > hot:
            found.append(
                (
                    "gpu.max_temperature",
                    f"GPU {d.index} ({d.name}) is at {d.temperature} °C, above {hot} °C: the "
                    f"host cools it badly and it will throttle; {RECREATE}",
                )
            )
    if wanted.healthy:
        problems = [problem for d in devices for problem in health_problems(d)]
        problems += [why] if (why := unknown.get("healthy")) else []
        if problems:
            found.append(("gpu.healthy", "; ".join(problems)))
    return found


@role("GPU", reads)
def apply(wanted: State, probe: Probe) -> None:
    """Record a violation for each unmet GPU requirement, and for an unreadable GPU state."""
    for finding, message in check(wanted.gpu or Gpu(), probe.gpu):
        findings.violation(message, finding)
