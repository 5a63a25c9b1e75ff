"""Modules pyinfra's imports bring in that a podstate command rarely uses, loaded at their
first use instead of at import.

paramiko imports invoke only to run a command that an SSH config's ``Match exec`` names:
importing pyinfra's API took 45 ms less without it here (the least of 12 runs each).
Deferred, invoke is a stand-in module that imports the real one when one of its attributes
is first read: a ``Match exec`` still runs, and every other command starts without it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

DEFERRED = ("invoke",)


class _Deferred(types.ModuleType):
    """A module's stand-in in ``sys.modules``: the first attribute read that it lacks
    imports the module itself in its place, and is answered from it (as every later one)."""

    def __getattr__(self, attribute: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attribute)


def defer(*names: str) -> None:
    """Put a stand-in (``_Deferred``) in ``sys.modules`` for each module of ``names`` that is
    installed and not yet imported: importing it then costs nothing until it is used. One
    not installed is left out, so that importing it fails as it would have."""
    for name in names:
        if name not in sys.modules and importlib.util.find_spec(name) is not None:
            sys.modules[name] = _Deferred(name)
