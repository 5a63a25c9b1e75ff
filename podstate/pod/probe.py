"""The probe of podstate's own deploy: one command that reads what every role reads.

Each role says what it reads (``reads(wanted)``, a podstate.facts.request ``Request``); the
deploy's probe is their merge, built from the desired state alone, so that
podstate.pod.fits checks the length of the very command a deploy sends.
"""

from __future__ import annotations

from typing import Any

from podstate.facts.probe import Probe
from podstate.facts.request import Request, merge
from podstate.roles import (
    authorized_keys,
    boot,
    disk,
    download,
    env,
    files,
    packages,
    ready,
    removal,
    repos,
    scratch,
    secrets,
    venv,
)
from podstate.run.role import read_probe

# Every role of podstate's deploy (deploy/pod.py, and the boot hook's, which the ready role
# runs) that reads more than the probe always reads: the GPU and shared memory roles do not.
ROLES = (
    scratch,
    env,
    files,
    authorized_keys,
    venv,
    ready,
    removal,
    boot,
    disk,
    download,
    packages,
    repos,
    secrets,
)


def request(wanted: dict[str, Any]) -> Request:
    """Return what the deploy's probe reads for ``wanted``: what every role reads."""
    return merge([role.reads(wanted) for role in ROLES])


def read(wanted: dict[str, Any]) -> Probe | None:
    """Return the pod probe for ``wanted``: everything every role reads, in one command.

    None when the probe failed; pyinfra has then already failed the pod.
    """
    return read_probe(request(wanted))
