"""Prompt, quiet exits when a run is cancelled (a CI job stopped, Ctrl-C)."""

from __future__ import annotations

import os
import signal
import sys


def _exit(signum: int, frame: object) -> None:  # noqa: ARG001 - signal handler signature
    name = signal.Signals(signum).name
    sys.stderr.write(
        f"\npodstate: stopped by {name}; every managed file on a pod is either its old or its "
        "new version, run again to finish\n"
    )
    sys.stderr.flush()
    os._exit(128 + signum)


def install() -> None:
    """Exit at once on SIGTERM/SIGINT with one line, instead of a traceback or a hang.

    Files are replaced on pods by rename, so stopping between two commands leaves nothing
    half-written; there is nothing to clean up before exiting.
    """
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit)
