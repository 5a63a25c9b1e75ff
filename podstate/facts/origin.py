"""Where origin's branch is now, asked from the control machine with a repository's deploy key.

The key is on a pod only while apply fetches, so a pod cannot ask origin itself; this
machine asks, once per run for every pod (``git ls-remote``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import threading

from podstate.desired.secret import Secret

_ASKED: dict[tuple[str, str], str] = {}  # (url, branch) -> what origin said, once per run
_ASKING = threading.Lock()  # pods are planned at once: one asks, the others wait for it


def ask_origin(url: str, branch: str, ssh_key: Secret) -> str:
    """Return where origin's ``branch`` is now, asked from this machine with the deploy key:
    a commit, ``none`` (origin has no such branch) or ``?`` (it could not be asked).

    The key is on a pod only while apply fetches, so a pod cannot ask; this machine asks
    once per run for every pod, with the key in a private temporary file, never prompting,
    within 15 seconds.
    """
    with _ASKING:
        if (url, branch) not in _ASKED:
            _ASKED[url, branch] = _ls_remote(url, branch, ssh_key)
        return _ASKED[url, branch]


def _ls_remote(url: str, branch: str, ssh_key: Secret) -> str:
    """Return what ``git ls-remote`` says of ``branch`` at ``url`` (see ``ask_origin``)."""
    with tempfile.TemporaryDirectory(prefix="podstate-key-") as directory:
        key = os.path.join(directory, "key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write(ssh_key.value if ssh_key.value.endswith("\n") else ssh_key.value + "\n")
        ssh = (
            f"ssh -F /dev/null -i {shlex.quote(key)} -o IdentitiesOnly=yes -o BatchMode=yes "
            "-o StrictHostKeyChecking=accept-new "
            f"-o UserKnownHostsFile={shlex.quote(os.path.join(directory, 'known_hosts'))}"
        )
        env = {**os.environ, "GIT_SSH_COMMAND": ssh, "GIT_TERMINAL_PROMPT": "0"}
        try:
            answer = subprocess.run(
                ["git", "ls-remote", "--", url, f"refs/heads/{branch}"],
                env=env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=15,
            )
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    if answer.returncode != 0:
        return "?"
    return answer.stdout.split()[0] if answer.stdout.split() else "none"
