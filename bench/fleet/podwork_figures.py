"""What the pods' own work measures (bench/fleet/podwork.py) say, derived from its samples:
the pods it measures on, and the probe and fold as differences of two measures. Beneath
the measuring, the tables and the targets, which all read it."""

from __future__ import annotations

from collections import Counter
from typing import Any

PODS = {"pod-1": "2 GPUs, PCIe (COMMUNITY)", "pod-2": "8 GPUs, NVLink (SECURE)"}


def derived(measured: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Return the probe (check less ``ssh true``), the fold of a reconfigure (reconfigure
    less check) and, where measured, the first probe of a container and the probe less its
    ``nvidia-smi`` from one pod's measures."""

    def less(a: str, b: str) -> dict[str, Any]:
        x, y = measured[a], measured[b]
        cpu = None if x["cpu_s"] is None or y["cpu_s"] is None else x["cpu_s"] - y["cpu_s"]
        names = Counter(x.get("by_program", {})) - Counter(y.get("by_program", {}))
        return {
            "cpu_s": cpu,
            "programs": x["programs"] - y["programs"],
            "by_program": dict(names.most_common()),
        }

    found = {"probe": less("check", "ssh true")}
    if "check, first probe" in measured:  # not measured in the grid
        found["probe, first of a container"] = less("check, first probe", "ssh true")
    found["fold of a reconfigure"] = less("reconfigure", "check")
    if "nvidia-smi query" in measured:  # results from before it was measured lack it
        found["probe less its nvidia-smi"] = less("check", "nvidia-smi query")
    return found
