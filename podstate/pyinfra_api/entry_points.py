"""The installed packages' entry points, read once in a block instead of at each asking.

Each asking (``importlib.metadata.entry_points``) reads the metadata of every installed
package. Before podstate's first connection they are asked for about 30 times: gevent's
plugin groups as pyinfra's CLI is imported (25), typeguard's plugins as pyinfra is
imported, and pyinfra's connectors each time an ``Inventory`` is made (2 a time, for the
check's). With 80 or more packages installed, that was a quarter of a
second before the first pod was contacted. This module imports nothing of pyinfra's, so
that a block opened before pyinfra is imported answers its imports' askings too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any

_read: list[metadata.EntryPoints] = []  # while a block is open: the one reading, once made
_asking: list[Callable[..., metadata.EntryPoints]] = []  # while one is open: the real asking
_CONNECTORS = "pyinfra.api.connectors"  # binds importlib's entry_points as it is imported


@contextmanager
def read_once() -> Iterator[None]:
    """Within the block, answer every asking for entry points (the standard library's and
    pyinfra's connectors') from one reading of the installed packages, made at the first.

    A block within a block shares the outer one's reading; the askings are put back as
    they were when the outermost block ends."""
    if metadata.entry_points is _answer:
        yield
        return
    asking = metadata.entry_points
    _asking.append(asking)
    metadata.entry_points = _answer  # type: ignore[assignment]
    connectors = sys.modules.get(_CONNECTORS)  # imported in the block, it takes _answer
    connectors_asking = connectors.entry_points if connectors else asking
    if connectors:
        connectors.entry_points = _answer  # type: ignore[attr-defined]
    try:
        yield
    finally:
        metadata.entry_points = asking
        connectors = sys.modules.get(_CONNECTORS)
        if connectors and connectors.entry_points is _answer:
            connectors.entry_points = connectors_asking  # type: ignore[attr-defined]
        _read.clear()
        _asking.clear()


def _answer(**select: Any) -> metadata.EntryPoints:
    """Return the entry points ``select`` chooses (all without it), from the block's one
    reading, made now if it is the first asking; outside a block (a module imported in one
    may keep it as its own), a reading of its own."""
    if not _asking:
        return _ORIGINAL(**select)  # type: ignore[return-value]
    if not _read:
        _read.append(_asking[0]())
    return _read[0].select(**select) if select else _read[0]


_ORIGINAL = metadata.entry_points  # importlib's, as it was when podstate was imported
