"""The machine a benchmark ran on: cores, memory, CPU, kernel and tool versions."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """Return what the results depend on: cores, memory, CPU, kernel and tool versions."""
    cpuinfo = _read("/proc/cpuinfo")
    meminfo = _read("/proc/meminfo")
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    mem_kib = re.search(r"^MemTotal:\s*(\d+)", meminfo, re.M)
    ssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True)
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(int(mem_kib[1]) / 2**20, 1) if mem_kib else None,
        "cpu": model[1].strip() if model else platform.processor(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pyinfra": _version("pyinfra"),
        "paramiko": _version("paramiko"),
        "ansible-core": _version("ansible-core"),
        "openssh": (ssh.stderr or ssh.stdout).strip().split(",")[0],
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
