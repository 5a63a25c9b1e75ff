"""NCCL guards for Community Cloud multi-GPU hosts, as profile variables."""

from __future__ import annotations

import shlex
from typing import Any

NAMES = ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE")


def variables(wanted: dict[str, str] | None, cloud: str, probe: dict[str, Any]) -> dict[str, str]:
    """Return the NCCL variables the profile must export ({} when none apply).

    ``auto`` p2p disables peer-to-peer on COMMUNITY pods with two or more GPUs unless every
    pair is NVLink-connected; ``auto`` ib disables InfiniBand on COMMUNITY pods.
    """
    if not wanted:
        return {}
    community = cloud != "SECURE"
    risky_p2p = community and len(probe["gpus"]) >= 2 and not probe["nvlink"]
    decide = {
        "NCCL_P2P_DISABLE": {"auto": risky_p2p, "disable": True}.get(wanted["p2p"], False),
        "NCCL_IB_DISABLE": {"auto": community, "disable": True}.get(wanted["ib"], False),
    }
    return {name: "1" for name, on in decide.items() if on}


def current(profile: str | None) -> dict[str, str]:
    """Return the NCCL variables a podstate profile exports now: what to keep while the
    GPUs cannot be read, since a guard must never fall off on an unknown."""
    found = {}
    for line in (profile or "").splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if line.startswith("export NCCL_") and value:
            found[name] = shlex.split(value)[0]
    return found
