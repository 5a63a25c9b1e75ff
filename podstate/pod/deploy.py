"""podstate's deploy: every role, in order, from one probe of the pod.

deploy/pod.py, a starter file, runs it with the other deploy files: ``pyinfra -y
inventories/pods.py deploy/*.py``. The pod lock and the violations report span every file
(see ``podstate.pod.bookends``).
"""

from pyinfra import host

from podstate.pod import bookends
from podstate.pod import probe as deploy_probe
from podstate.roles import (
    authorized_keys,
    disk,
    download,
    env,
    files,
    gpu,
    packages,
    repos,
    scratch,
    secrets,
    shm,
    venv,
)


def run() -> None:
    """Plan podstate's part of the run on the pod pyinfra is planning for: the lock, every
    role in order from one probe (none once the disk role finds the pod failed), then the
    ready marker and the report. Returns nothing: pyinfra runs what it planned."""
    wanted = host.data.podstate
    bookends.start()
    probe = deploy_probe.read(wanted)  # what every role reads, in one command

    converging = probe is not None and disk.apply(wanted, probe)  # None: the pod failed already
    if converging:
        packages.apply(wanted, probe)  # first: other roles may need what it installs
        gpu.apply(wanted, probe)
        download.apply(wanted, probe)
        scratch.apply(wanted, probe)
        shm.apply(wanted, probe)
        secrets.apply(wanted, probe)  # before env: the profile sources the secrets file
        env.apply(wanted, probe)
        files.apply(wanted, probe)
        authorized_keys.apply(wanted, probe)
        venv.apply(wanted, probe)
        repos.apply(wanted, probe)
    # After the roles and every other deploy file: the ready marker, the lock, the report.
    bookends.finish(wanted, probe if converging else None)
