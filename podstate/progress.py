"""Progress of a long run on stderr: how many pods are done, for how long it has run, and the
slowest pods still running.

On a terminal, one line redrawn in place and cleared before the run's own output; without
one (a CI log), a line at most every ``LOG_EVERY`` seconds while pods are still running, so a
run that finishes sooner prints nothing. Nothing goes to stdout: a report there stays whole.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

import gevent

LOG_EVERY = 30.0  # seconds between two lines in a log
REDRAW_EVERY = 1.0  # seconds between two redraws on a terminal
SHOWN = 3  # the slowest pods named


class Progress:
    """The pods of a run and the stage each is in, told by ``pod(name, stage)``; a pod whose
    stage is ``done`` (``checked`` for a check, ``ready`` for a wait) is done."""

    def __init__(
        self,
        command: str,
        out: TextIO,
        tty: bool,
        done: str = "checked",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.command, self.out, self.tty, self.done = command, out, tty, done
        self.clock = clock
        self.started = clock()
        self.last_line = self.started  # a log's first line comes LOG_EVERY seconds in
        self.stages: dict[str, tuple[str, float]] = {}  # pod: (stage, since when)
        self.shown = False  # a line is on the terminal

    def pod(self, name: str, stage: str) -> None:
        """Record that pod ``name`` is now in ``stage`` (a new name joins the run)."""
        if self.stages.get(name, ("", 0.0))[0] != stage:
            self.stages[name] = (stage, self.clock())

    def line(self) -> str:
        """Return the progress as one line: done of all, elapsed, the slowest still running
        (those longest in their stage first), or that no pod is known yet."""
        now = self.clock()
        elapsed = f"{now - self.started:.0f} s"
        if not self.stages:
            return f"podstate {self.command}: listing the pods, {elapsed}"
        running = sorted(
            (since, name, stage)
            for name, (stage, since) in self.stages.items()
            if stage != self.done
        )
        text = (
            f"podstate {self.command}: {len(self.stages) - len(running)} of {len(self.stages)} "
            f"pods {self.done}, {elapsed}"
        )
        if running:
            slowest = [f"{name} ({stage}, {now - since:.0f} s)" for since, name, stage in running]
            more = len(slowest) - SHOWN
            text += (
                "; slowest: " + ", ".join(slowest[:SHOWN]) + (f", {more} more" if more > 0 else "")
            )
        return text

    def tick(self) -> None:
        """Show the progress: redrawn on a terminal; in a log, a line when LOG_EVERY seconds
        have passed since the last one and a pod is still running (or none is known yet)."""
        if self.tty:
            self.out.write("\r" + self.line()[: self._width() - 1] + "\x1b[K")
            self.shown = True
        elif self.clock() - self.last_line >= LOG_EVERY and not self._all_done():
            self.out.write(self.line() + "\n")
            self.last_line = self.clock()
        else:
            return
        self.out.flush()

    def clear(self) -> None:
        """Remove the line from the terminal, before the run's own output."""
        if self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.shown = False

    def _width(self) -> int:
        """Return the terminal's width: ``COLUMNS`` where it is a width, else the output's
        own terminal's (80 where neither says)."""
        try:
            if (columns := int(os.environ.get("COLUMNS", ""))) > 0:
                return columns
        except ValueError:
            pass
        try:
            return os.get_terminal_size(self.out.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):  # not a terminal, or no descriptor
            return 80

    def _all_done(self) -> bool:
        return bool(self.stages) and all(s == self.done for s, _ in self.stages.values())


@contextmanager
def shown(progress: Progress | None) -> Iterator[None]:
    """Within the block, tick ``progress`` (None: nothing) in the background, every second on
    a terminal, else as often as a log line may come; clear it at the end.

    The ticks run in a greenlet: the run's pods are worked on in gevent's loop (pyinfra's
    connections, and its patched sleep), which lets the greenlet run while they wait."""
    if progress is None:
        yield
        return

    def tick() -> None:
        while True:
            gevent.sleep(REDRAW_EVERY if progress.tty else 1.0)
            progress.tick()

    ticker = gevent.spawn(tick)
    try:
        yield
    finally:
        ticker.kill()
        progress.clear()
