"""A per-pod lock so that two runs (two CI jobs, a person and ``podstate watch``) never
interleave their changes to a pod.

No command is spent on it when nothing changes: a run takes the lock with its first command
that changes a pod, holds it for the rest of the run on that pod (every deploy file's
operations, uploads and callbacks, and the waits between them), and releases it with its
last. While the run's SSH connection to the pod is open, a keeper on the pod renews the
lock; a run that is killed loses it ``PODSTATE_LOCK_GRACE`` seconds after its connection
closed, or once the time limit of a command still running has passed. A second run waits
up to ``PODSTATE_LOCK_WAIT`` seconds, then fails that pod with a line naming the holder; the
other pods go on. Taking, taking over, renewing and releasing are each atomic on the pod
(``flock``), and only the holder renews or releases. The shell is scripts/lock.sh.
"""

from __future__ import annotations

import os
import shlex
import socket
import time
import uuid

from pyinfra import host
from pyinfra.api import Host, StringCommand

from podstate import settings
from podstate.facts.lock import LockReading
from podstate.paths import LOCK
from podstate.run import findings
from podstate.shell import script

TOKEN = uuid.uuid4().hex
OWNER = f"{socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
MARGIN = 30
GRACE_MIN = 3  # seconds; the keeper renews every second
_HELD: set[str] = set()  # the pods whose lock this run holds, as the run executes
_SEEN: dict[str, str] = {}  # each pod's lock count as its probe read it, or "held"
probe_wait = settings.LOCK_WAIT  # how long the probe waits for another run's lock (check: 0)


class Raw(str):
    """A word of the lock's command passed to sh as it is: an expansion, such as the boot
    hook's ``"$podstate_token"``."""


def _lock(*args: str | int, inline: bool = False) -> str:
    """Return the sh command that runs scripts/lock.sh with ``args``, each quoted unless Raw:
    in a shell of its own, or ``inline``, in a subshell of the sh that runs the command (one
    program fewer; only where that shell is sh, as pyinfra's wrapper is)."""
    words = [a if isinstance(a, Raw) else shlex.quote(str(a)) for a in args]
    if inline:  # the options a shell of its own would start with, whatever the caller's
        return f"(set +Cefu -- {' '.join(words)}\n{script('lock.sh')}\n)"
    return " ".join(["sh -c", shlex.quote(script("lock.sh")), "lock", *words])


def release_command() -> str:
    """Return sh that removes the lock if, and only if, this run holds it."""
    return _lock("release", LOCK, TOKEN)


def guarded(
    command: str,
    ttl: int | None = None,
    release: bool = False,
    held: bool = False,
    seen: str = "",
    token: str = TOKEN,
    owner: str = OWNER,
    wait: int | None = None,
    inline: bool = False,
) -> str:
    """Return ``command`` run under this run's lock (or under ``token``'s, named ``owner``,
    for a taker that is not this run: the boot hook).

    Unless ``held`` (this run holds it already, and the command fails if it no longer
    does), the lock is taken first, waiting a bounded time for another run; with ``seen``
    (the lock's count as this run's probe read it), it is not taken, and the command fails,
    when another run took it since: this run's plan was made from what that run changed. While the
    command runs the lock is valid for its time limit ``ttl``; once it is done, the keeper
    renews it until the run's connection closes. One that fails releases it at once; with
    ``release``, so does one that succeeds (the run's last command). ``command`` runs in a
    subshell of its own, outside any ``||`` or ``if``, so a ``set -e`` in it works.
    ``wait`` is how long another run's lock is waited for (default ``PODSTATE_LOCK_WAIT``);
    ``inline``: see ``_lock``.
    """
    ttl = (ttl or settings.COMMAND_TIMEOUT) + MARGIN
    return _lock(
        "run",
        LOCK,
        token,
        owner,
        "hold" if held else "take",
        ttl,
        settings.LOCK_WAIT if wait is None else wait,
        max(settings.LOCK_GRACE, GRACE_MIN),
        "release" if release else "keep",
        seen,
        command,
        inline=inline,
    )


def read(pod: Host, reading: LockReading | None) -> None:
    """Remember what ``pod``'s probe read of the lock (``podstate.facts.lock``: its count, and
    whether another run held it even after the probe waited), for this run's first take, and
    who held it, for the check (``findings.busy``)."""
    if reading is not None:
        _SEEN[pod.name] = "held" if reading.held else str(reading.gen)
        findings.of(pod).busy = reading.owner if reading.held else None


def seen(pod: Host) -> str:
    """Return the lock's count as ``pod``'s probe read it ("" if it was not read)."""
    return _SEEN.get(pod.name, "")


def holds(pod: Host) -> bool:
    """Return whether this run holds ``pod``'s lock (as far as its commands have told)."""
    return pod.name in _HELD


def ran(pod: Host, took: bool) -> None:
    """Record how a command under the lock ended on ``pod``: with the lock held (``took``),
    or released (it failed, or was the run's last)."""
    (_HELD.add if took else _HELD.discard)(pod.name)


def command_for(pod: Host, command: str, ttl: int | None = None, release: bool = False) -> str:
    """Return ``command`` under the lock for ``pod`` as this run executes: taking the lock,
    or holding it if this run took it before; the lock is recorded as held from now on."""
    guarded_command = guarded(command, ttl, release, holds(pod), seen(pod))
    ran(pod, not release)
    return guarded_command


class Change(StringCommand):
    """A command that changes the pod, under the run's pod lock.

    It keeps the command itself (``inner``) and its time limit (``ttl``, None: the default),
    so that ``podstate.run.fold`` can run it with the pod's other changes in one command, and a
    callback can run it with ``command_for``. A ``later`` change (a file write) may run in a
    fold before the writes of the changes before it are proved (they are proved together).
    """

    def __init__(self, inner: str, ttl: int | None = None, later: bool = False) -> None:
        super().__init__(guarded(inner, ttl))
        self.inner = inner
        self.ttl = ttl
        self.later = later


def changing(command: str, ttl: int | None = None, later: bool = False) -> Change:
    """Return ``command`` under the run's pod lock (``later``: see ``Change``), and remember
    to release it at the end."""
    findings.of(host).locked = True
    return Change(command, ttl, later)
