"""A per-pod lock so that two runs (two CI jobs, a person and CI) never interleave writes.

No command is spent on it when nothing changes: every command that changes a pod first
takes the lock (or finds it already held by this run), and the run's last operation
releases it. A second run waits up to ``PODSTATE_LOCK_WAIT`` seconds, then fails that pod
with a message naming the holder; the other pods go on. A lock left by a killed run
expires on its own (see ``guarded``).
"""

from __future__ import annotations

import os
import shlex
import socket
import time
import uuid

from podstate import settings

LOCK = "/run/podstate.lock"
TOKEN = uuid.uuid4().hex
OWNER = f"{socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
MARGIN = 30


def _acquire(ttl: int) -> str:
    """Return sh that takes (or refreshes) the lock, waiting a bounded time for another run."""
    return (
        f"L={LOCK}; n=0; "
        f'while ! mkdir "$L" 2>/dev/null; do '
        f'[ "$(cat "$L/token" 2>/dev/null)" = {TOKEN} ] && break; '
        f'e=$(cat "$L/expires" 2>/dev/null) || '
        f'e=$(($(stat -c %Y "$L" 2>/dev/null || echo 0) + 60)); '
        f'if [ "$(date +%s)" -gt "${{e:-0}}" ]; then rm -rf "$L"; continue; fi; '
        f"n=$((n + 1)); if [ $n -gt {settings.LOCK_WAIT} ]; then "
        f'echo "podstate: skipped: another podstate run holds this pod'
        f' ($(cat "$L/owner" 2>/dev/null)); try again when it has finished" >&2; exit 75; fi; '
        f"sleep 1; done; "
        f'echo {TOKEN} > "$L/token" && echo {shlex.quote(OWNER)} > "$L/owner" && '
        f'echo $(($(date +%s) + {ttl + MARGIN})) > "$L/expires"'
    )


def release_command() -> str:
    """Return sh that removes the lock if, and only if, this run holds it."""
    return f'[ "$(cat {LOCK}/token 2>/dev/null)" != {TOKEN} ] || rm -rf {LOCK}'


def guarded(command: str, ttl: int | None = None) -> str:
    """Return ``command`` run under this run's lock.

    While the command runs the lock is valid for its time limit; once it is done, for
    ``PODSTATE_LOCK_GRACE`` seconds, until the run's next command renews it. So the lock
    of a run killed between commands expires soon after its last command, and one that
    fails releases it at once.
    """
    return (
        f"{_acquire(ttl or settings.COMMAND_TIMEOUT)} || exit $?; "
        f"( {command} ); rc=$?; if [ $rc -ne 0 ]; then {release_command()}; exit $rc; fi; "
        f"echo $(($(date +%s) + {settings.LOCK_GRACE})) > {LOCK}/expires"
    )
