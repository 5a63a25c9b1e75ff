"""The SSH key files pods name: each one is there before any pod is contacted."""

from __future__ import annotations

from pathlib import Path

from podstate.desired.errors import SpecError
from podstate.inventory.podsfile import Pod


def check(pods: list[Pod]) -> None:
    """Return None when every ``ssh_key`` the pods name is a file; else raise SpecError, one
    line naming each missing file and the pods that use it.

    Without it, pyinfra tries every pod and each fails alike, the cause in one line per pod
    at best; a key file that is not there is a mistake in the pods file (or a key not made
    yet), and fails the whole run at once."""
    users: dict[str, list[str]] = {}
    for pod in pods:
        key = pod.data.get("ssh_key")
        if isinstance(key, str) and key and not Path(key).expanduser().is_file():
            users.setdefault(key, []).append(pod.name)
    if users:
        missing = "; ".join(f"{key} (ssh_key of {', '.join(pods)})" for key, pods in users.items())
        raise SpecError(
            f"no such SSH key file: {missing}: make it (ssh-keygen -t ed25519 -f FILE) or set "
            "ssh_key to the private key your pods accept"
        )
