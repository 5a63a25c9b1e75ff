"""A per-pod lock so that two runs (two CI jobs, a person and CI) never interleave writes.

No command is spent on it when nothing changes: every command that changes a pod first
takes the lock (or finds it already held by this run), and the run's last operation
releases it. A second run waits up to ``PODSTATE_LOCK_WAIT`` seconds, then fails that pod
with a message naming the holder; the other pods go on. A lock left by a killed run
expires on its own (see ``guarded``). The shell is scripts/lock.sh.
"""

from __future__ import annotations

import os
import shlex
import socket
import time
import uuid

from pyinfra import host
from pyinfra.api import StringCommand

from podstate import findings, settings
from podstate.shell import script

LOCK = "/run/podstate.lock"
TOKEN = uuid.uuid4().hex
OWNER = f"{socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
MARGIN = 30


def _lock(*args: str | int) -> str:
    """Return the sh command that runs scripts/lock.sh with ``args``."""
    words = [str(a) for a in args]
    return " ".join(["sh -c", shlex.quote(script("lock.sh")), "lock", *map(shlex.quote, words)])


def release_command() -> str:
    """Return sh that removes the lock if, and only if, this run holds it."""
    return _lock("release", LOCK, TOKEN)


def guarded(command: str, ttl: int | None = None, release: bool = False) -> str:
    """Return ``command`` run under this run's lock.

    The lock is taken first (waiting a bounded time for another run). While the command
    runs the lock is valid for its time limit ``ttl``; once it is done, for
    ``PODSTATE_LOCK_GRACE`` seconds, until the run's next command renews it. So the lock
    of a run killed between commands expires soon after its last command, and one that
    fails releases it at once; with ``release``, so does one that succeeds (the run's last
    command). ``command`` runs in a subshell of its own, outside any ``||`` or ``if``, so a
    ``set -e`` in it works.
    """
    ttl = (ttl or settings.COMMAND_TIMEOUT) + MARGIN
    grace = "release" if release else settings.LOCK_GRACE
    return _lock("run", LOCK, TOKEN, OWNER, ttl, settings.LOCK_WAIT, grace, command)


class Change(StringCommand):
    """A command that changes the pod, under the run's pod lock.

    It keeps the command itself (``inner``) and its time limit (``ttl``, None: the default),
    so that ``podstate.fold`` can run it with the pod's other changes in one command.
    """

    def __init__(self, inner: str, ttl: int | None = None) -> None:
        super().__init__(guarded(inner, ttl))
        self.inner = inner
        self.ttl = ttl


def changing(command: str, ttl: int | None = None) -> Change:
    """Return ``command`` under the run's pod lock, and remember to release it at the end."""
    findings.of(host).locked = True
    return Change(command, ttl)
