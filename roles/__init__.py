"""podstate's roles, one per module, installed as ``podstate.roles``.

Each role is a pyinfra deploy (``@role``) with one contract, ``apply(wanted, probe=None)``:
``wanted`` is a desired state as in ``host.data.podstate`` (``podstate.desired.spec.desired`` makes
one from a dict), ``probe`` the pod probe. podstate's own deploy file reads the probe once
for every role (``probe(wanted)``); a role called alone, from a team's own deploy file,
reads it itself.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host

from podstate.facts.probe import PodProbe


def probe(wanted: dict[str, Any]) -> dict[str, Any] | None:
    """Return the pod probe for ``wanted``: everything every role reads, in one command.

    None when the probe failed; pyinfra has then already failed the pod.
    """
    from podstate import settings
    from podstate.roles import secrets
    from podstate.run import lock

    found = host.get_fact(
        PodProbe,
        **probe_arguments(wanted),
        lock_wait=min(lock.probe_wait, settings.COMMAND_TIMEOUT // 2),
        _stdin=secrets.probe_stdin(wanted),
    )
    if found is not None:
        lock.read(host, found["lock"])
    return found


def probe_arguments(wanted: dict[str, Any]) -> dict[str, Any]:
    """Return the probe's arguments for ``wanted``: what each role needs read. They depend
    on the desired state alone, so the probe's command can be built (and its length
    checked, ``podstate.pod.fits``) before any pod is contacted."""
    from podstate.roles import (
        authorized_keys,
        boot,
        env,
        files,
        packages,
        ready,
        repos,
        scratch,
        secrets,
        venv,
    )

    return {
        "paths": scratch.paths(wanted)
        + env.paths(wanted)
        + venv.paths(wanted)
        + ready.directories(wanted)
        + boot.directories(wanted),
        "files": list(
            dict.fromkeys(
                env.FILES
                + files.paths(wanted)
                + authorized_keys.paths(wanted)
                + ready.paths(wanted)
                + boot.paths(wanted)
            )
        ),
        "venv": venv.probe_args(wanted),
        "free": list((wanted.get("disk") or {}).get("min_free") or {}),
        "download": wanted.get("download"),
        "environ": env.environ_names(wanted),
        "apt": packages.probe_args(wanted),
        "repos": repos.probe_args(wanted),
        "secrets": secrets.probe_args(wanted),
        "boot": boot.probe_args(wanted),
    }
