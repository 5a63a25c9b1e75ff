"""Prompt, quiet exits when a run is cancelled (a CI job stopped, Ctrl-C).

Once podstate's code is loaded (config.py, the first file of podstate's a run reads), a
SIGINT or SIGTERM ends a run in one of two ways, whatever the moment it arrives:

- while the run's Python code runs (connecting, deploying, disconnecting): one line on
  stderr and status 128 + the signal (130, 143);
- once the run is over and Python shuts down (atexit): not at all; the run ends with its
  own status. Python's shutdown would otherwise put the default actions back
  (``_PySignal_Fini``), and a signal then kills the process silently (status -2 for the
  caller) after the run had already finished.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from typing import TextIO

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_MESSAGE: dict[int, bytes] = {
    signum: (
        f"\npodstate: stopped by {signal.Signals(signum).name}; every managed file on a pod "
        "is either its old or its new version, run again to finish\n"
    ).encode()
    for signum in SIGNALS
}
_installed = False


def _exit(signum: int, frame: object) -> None:  # signal handler signature
    # Nothing here may raise or depend on the interpreter's state (it can run late in a
    # run, while objects are being torn down): bytes prepared in advance, raw writes.
    try:
        sys.stdout.flush()
    except Exception:  # a closed or broken stdout must not stop the exit
        pass
    try:
        os.write(2, _MESSAGE.get(signum, _MESSAGE[signal.SIGTERM]))
    except OSError:
        pass
    os._exit(128 + signum)


def exit_now(signum: int) -> None:
    """Stop the process at once, as a signal does once ``install`` ran: one line on stderr,
    status 128 + ``signum`` (for a command that let a first signal finish its work, on the
    second one)."""
    _exit(signum, None)


def _finished() -> None:
    """At interpreter shutdown: the run is over, so later signals leave its status alone.

    Ignored, and blocked as well: gevent's loop puts ``SIG_DFL`` back for SIGINT if its
    watcher is stopped during the teardown, and a blocked signal stays pending until exit.
    """
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def install() -> None:
    """Exit at once on SIGTERM/SIGINT with one line, instead of a traceback or a hang.

    Files are replaced on pods by rename, so stopping between two commands leaves nothing
    half-written; there is nothing to clean up before exiting.
    """
    global _installed
    for signum in SIGNALS:
        signal.signal(signum, _exit)
    if not _installed:
        _installed = True
        atexit.register(_finished)


def write_raw(out: TextIO, text: str) -> None:
    """Write ``text`` to ``out``'s file descriptor, past its buffer: safe in a signal
    handler, where a buffered write could re-enter the buffer it interrupted."""
    try:
        os.write(out.fileno(), text.encode())
    except (OSError, ValueError, AttributeError):
        pass
