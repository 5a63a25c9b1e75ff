"""The deploy ``podstate uninstall`` runs (podstate.check.uninstall): everything podstate's
records say it made on the pod is taken away (podstate.pod.uninstall), under the pod lock,
in one command.

It reads no desired state: only the records on the pod (roles/removal.py). The volume whose
record it reads is ``PODSTATE_UNINSTALL_VOLUME`` (``/workspace`` by default); the apt
packages podstate installed go only with ``PODSTATE_UNINSTALL_PACKAGES=1``; the venv stays
with ``PODSTATE_UNINSTALL_KEEP_VENV=1``; a tmpfs that holds files goes with
``PODSTATE_UNINSTALL_DISCARD_SCRATCH=1``.
"""

import os

from podstate.paths import VOLUME
from podstate.pod import bookends, uninstall
from podstate.run.role import read_probe

volume = os.environ.get("PODSTATE_UNINSTALL_VOLUME") or VOLUME
bookends.start()
probe = read_probe(uninstall.reads(volume))
if probe is not None:
    uninstall.apply(
        probe,
        volume,
        packages=os.environ.get("PODSTATE_UNINSTALL_PACKAGES") == "1",
        keep_venv=os.environ.get("PODSTATE_UNINSTALL_KEEP_VENV") == "1",
        discard_scratch=os.environ.get("PODSTATE_UNINSTALL_DISCARD_SCRATCH") == "1",
    )
with bookends.finish():
    pass  # nothing of its own after every deploy file: the release and the report
