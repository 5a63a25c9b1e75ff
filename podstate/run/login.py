"""When the probe brought no answer: is it the login shell, and can podstate fix it?

Vast's images start every SSH session inside tmux unless ``~/.no_auto_tmux`` exists; without
a terminal tmux fails ("no sessions", "open terminal failed: not a terminal") and the
session ends, so ``ssh pod 'command'`` runs nothing. podstate never takes that for a
reading: the probe's answer is read only between its own ``begin`` and ``end``. When there
is no answer, one ``echo`` says whether commands run at all; if tmux ate it, podstate
creates ``~/.no_auto_tmux`` over SFTP (which goes through no login shell), says so and
probes again; otherwise the pod fails with one line naming the cause and the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyinfra import host, state

from podstate.pyinfra_api import execute

NO_AUTO_TMUX = ".no_auto_tmux"  # relative to the SSH user's home, as SFTP takes it
_SIGN = "podstate-login-ok"
# Whether this run may write ~/.no_auto_tmux: an apply may, a check (read-only) names it.
may_fix = True
_TMUX = ("no sessions", "open terminal failed", "tmux")


def cause(status: bool, lines: execute.Lines) -> str | None:
    """Return why commands do not run on a pod, from what ``echo podstate-login-ok`` did
    there (its success and output lines): ``tmux`` (the login started tmux), ``login``
    (anything else that kept the command from printing its line), or None when it ran."""
    if status and (("stdout", _SIGN) in lines):
        return None
    text = " ".join(line for _, line in lines).lower()
    return "tmux" if any(sign in text for sign in _TMUX) else "login"


def recover(probe: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
    """Return the probe read again after a first one brought no answer: once the login
    shell is fixed (tmux: ``~/.no_auto_tmux`` written over SFTP, and said, unless ``may_fix``
    is off, as in a check), or to let it
    fail as pyinfra fails a command when the login runs commands. None (the pod failed,
    with one line naming the cause and the fix) when commands cannot run."""
    answer = execute.try_shell(state, host, f"echo {_SIGN}")
    if answer is None:  # the connection failed: the probe again fails the pod as pyinfra does
        return probe()
    status, lines = answer
    why = cause(status, lines)
    if why is None:
        return probe()
    said = "; ".join(line for _, line in lines if line.strip())[:200] or "nothing"
    if why == "tmux":
        if may_fix and execute.upload_empty(host, NO_AUTO_TMUX):
            execute.log(
                host,
                "SSH sessions started inside tmux and ran no command (Vast's auto-tmux): "
                "created ~/.no_auto_tmux over SFTP",
                "yellow",
            )
            return probe()
        execute.fail(
            state,
            host,
            f"SSH sessions start inside tmux and run no command (it said: {said}); "
            + ("an apply creates ~/.no_auto_tmux over SFTP, or " if not may_fix else "")
            + "create ~/.no_auto_tmux on the pod (`touch ~/.no_auto_tmux` in Vast's onstart "
            "script)",
        )
        return None
    execute.fail(
        state,
        host,
        f"the pod's login shell runs no command (it said: {said}); fix the SSH user's "
        "shell startup files (~/.bashrc, ~/.profile) so that `ssh pod 'echo ok'` prints ok",
    )
    return None
