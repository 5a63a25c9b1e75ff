"""Time limits and parallelism, each overridable from the environment.

A pod that dies or hangs mid-run is reported within these bounds while the others finish:
connecting (TCP, SSH banner, authentication) is bounded by ``PODSTATE_CONNECT_TIMEOUT``
seconds and every remote command by ``PODSTATE_COMMAND_TIMEOUT`` seconds. A run that finds
another run's lock on a pod waits ``PODSTATE_LOCK_WAIT`` seconds, then skips that pod.
"""

from __future__ import annotations

import os

from podstate.pyinfra_api import cli as pyinfra_cli


def _seconds(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() and int(value) > 0 else default


CONNECT_TIMEOUT = _seconds("PODSTATE_CONNECT_TIMEOUT", 10)
COMMAND_TIMEOUT = _seconds("PODSTATE_COMMAND_TIMEOUT", 120)
VENV_TIMEOUT = _seconds("PODSTATE_VENV_TIMEOUT", 1800)  # building a venv can take minutes
LOCK_WAIT = _seconds("PODSTATE_LOCK_WAIT", 60)
APT_TIMEOUT = _seconds("PODSTATE_APT_TIMEOUT", 900)  # apt-get update and install, together
APT_LOCK_WAIT = _seconds("PODSTATE_APT_LOCK_WAIT", 120)  # for another apt's lock, within it
LOCK_GRACE = _seconds("PODSTATE_LOCK_GRACE", 30)
# Every pod at once: a run costs one round trip per step whatever the fleet size, and
# pyinfra's own default (20 per CPU core) would add a step at 40 pods on a 2-core runner.
# pyinfra warns above its MAX_PARALLEL (None where it lacks it: verify() stops the run then).
PARALLEL = min(_seconds("PODSTATE_PARALLEL", 1000), pyinfra_cli.max_parallel() or 1000)


def host_data() -> dict[str, object]:
    """Return the pyinfra host data that applies these limits to every pod's connection."""
    return {
        "_timeout": COMMAND_TIMEOUT,
        "ssh_paramiko_connect_kwargs": {
            "banner_timeout": CONNECT_TIMEOUT,
            "auth_timeout": CONNECT_TIMEOUT,
            "channel_timeout": CONNECT_TIMEOUT,
        },
    }
