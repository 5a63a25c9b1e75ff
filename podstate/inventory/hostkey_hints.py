"""pyinfra's advice on a changed host key, rewritten to name podstate's store.

pyinfra suggests ``ssh-keygen -R [host]:port`` when a pod's key changed, which edits
~/.ssh/known_hosts and would not help a pod whose key podstate keeps (``hostkeys``).
"""

from __future__ import annotations

import logging

from podstate.inventory.hostkeys import HostKeyTrust
from podstate.pyinfra_api import logs


class _RemovalHint(logging.Filter):
    """Rewrites pyinfra's "ssh-keygen -R [host]:port" advice for pods in podstate's store.

    On a changed host key pyinfra warns that the remote identification changed and suggests
    ``ssh-keygen -R``, which edits ~/.ssh/known_hosts and would not help: podstate keeps the
    key elsewhere. This says where, and why the key was not renewed.
    """

    def __init__(self) -> None:
        super().__init__("podstate-hostkeys")
        self.pods: dict[str, HostKeyTrust] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        address = logs.removal_hint(message)
        trust = self.pods.get(address) if address else None
        if trust is not None:
            since = f"startedAt {trust.recorded_at}" if trust.recorded_at else "an unknown start"
            record.msg = (
                f"    rm {trust.known_hosts}    (pod {trust.name}, RunPod id {trust.pod_id}: "
                f"RunPod reports no restart since its key was recorded at {since}, so the new "
                "key may be an interception; remove the file only if you know why it changed)"
            )
            record.args = ()
        return True


_HINT = _RemovalHint()


def explain_mismatches(trusts: list[HostKeyTrust]) -> None:
    """Make pyinfra's changed-host-key warning name these pods' files instead of ssh-keygen.

    Installs (once per process) a filter on pyinfra's logger; returns nothing.
    """
    _HINT.pods = {trust.address: trust for trust in trusts}
    logger = logging.getLogger("pyinfra")
    if _HINT not in logger.filters:
        logger.addFilter(_HINT)
