"""NCCL guards for Community Cloud multi-GPU hosts, as profile variables."""

from __future__ import annotations

import shlex
from typing import Protocol

NAMES = ("NCCL_P2P_DISABLE", "NCCL_IB_DISABLE")


class Modes(Protocol):
    """The desired state's ``nccl`` section (podstate.desired.state.Nccl): each guard's mode,
    ``auto``, ``disable`` or ``leave``."""

    @property
    def p2p(self) -> str: ...

    @property
    def ib(self) -> str: ...


def variables(
    wanted: Modes | None,
    cloud: str,
    gpus: int | None,
    nvlink: bool,
    profile: str | None = None,
) -> dict[str, str]:
    """Return the NCCL variables the profile must export ({} when none apply), for a pod
    with ``gpus`` GPUs (None: they cannot be read), every pair on NVLink with ``nvlink``.

    ``auto`` ib disables InfiniBand on COMMUNITY pods: the cloud alone decides. ``auto`` p2p
    disables peer-to-peer on COMMUNITY pods with two or more GPUs unless every pair is
    NVLink-connected; when the GPUs cannot be read, their topology is unknown and counts as
    unsafe (disabled P2P costs bandwidth only). While they cannot be read, a P2P guard
    already in ``profile`` (podstate's profile on the pod) stays, whatever is wanted: an
    unknown never drops a guard.
    """
    readable = gpus is not None
    kept = {} if readable else {k: v for k, v in current(profile).items() if k == NAMES[0]}
    if not wanted:
        return kept
    community = cloud != "SECURE"
    risky_p2p = community and (gpus is None or gpus >= 2 and not nvlink)
    decide = {
        "NCCL_P2P_DISABLE": {"auto": risky_p2p, "disable": True}.get(wanted.p2p, False),
        "NCCL_IB_DISABLE": {"auto": community, "disable": True}.get(wanted.ib, False),
    }
    return {**kept, **{name: "1" for name, on in decide.items() if on}}


def current(profile: str | None) -> dict[str, str]:
    """Return the NCCL variables a podstate profile exports now: the P2P guard among them is
    kept while the GPUs cannot be read, since a guard must never fall off on an unknown."""
    found = {}
    for line in (profile or "").splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if line.startswith("export NCCL_") and value:
            found[name] = shlex.split(value)[0]
    return found
