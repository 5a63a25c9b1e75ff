"""The probe of podstate's own deploy: one command that reads what every role reads.

Each role says what it reads (``reads(wanted)``, a podstate.facts.request ``Request``); the
deploy's probe is the merge of every phase's, built from the desired state alone, so that
podstate.pod.fits checks the length of the very command a deploy sends.
"""

from __future__ import annotations

from podstate.desired.state import State
from podstate.facts.probe import Probe
from podstate.facts.request import Request, merge
from podstate.pod.phases import readers
from podstate.run.role import read_probe


def request(wanted: State) -> Request:
    """Return what the deploy's probe reads for ``wanted``: what every phase reads
    (podstate.pod.phases), in their order."""
    return merge([reads(wanted) for reads in readers()])


def read(wanted: State) -> Probe | None:
    """Return the pod probe for ``wanted``: everything every phase reads, in one command.

    None when the probe failed; pyinfra has then already failed the pod.
    """
    return read_probe(request(wanted))
