"""The markers a fold's segment prints between its steps' output (podstate.run.fold), and the
reader that splits what the segment prints into each step's output and its markers.

A marker is a line of its own: the shell prints a newline before it, whatever the output
before it ended with, and that newline is the marker's, not the output's. It is found
wherever it arrives: after output with no final newline, split across chunks. It carries
this run's own token, so output that merely looks like one is output.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from podstate.run import lock

MARK = f"@@podstate-{lock.TOKEN[:12]}"  # markers' start: this run's own, in no output by chance
_MARKER = re.compile(b"\n" + re.escape(MARK.encode()) + rb" (ok )?([0-9]{1,6})\n")
_MARKER_MAX = len(MARK) + 12  # a marker's bytes after its first newline, at most


class Stream:
    """What a segment's command prints, split into its steps' output and their markers,
    wherever a marker falls among the chunks it arrives in."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.rest = b""  # the end of the last chunk, held back: it may start a marker

    def feed(self, chunk: bytes) -> Iterator[bytes | tuple[bool, int]]:
        """Yield, in order, the output in ``chunk`` and each marker, as (``ok``, step); b"":
        the stream ended, and what was held back is output."""
        data, at = self.rest + chunk, 0
        for found in _MARKER.finditer(data):
            if int(found[2]) < self.steps:  # else a marker of no step: output
                if found.start() > at:
                    yield data[at : found.start()]
                yield found[1] is not None, int(found[2])
                at = found.end()
        # a marker not all there yet starts at the last newline (it holds none after it)
        cut = data.rfind(b"\n", at) if chunk else -1
        cut = len(data) if cut < 0 or len(data) - cut > _MARKER_MAX else cut
        if cut > at:
            yield data[at:cut]
        self.rest = data[cut:]
