"""The desired states that passed the schema before, kept so that a run whose vars files did
not change starts without importing jsonschema, its largest single import (about 50 ms of
each start here).

A state is named by the SHA-256 of the schema's text and of the state as canonical JSON: a
name on the list is a state that this very schema accepted. Only passes are kept; a state
that fails is checked again at every run. The list is one file in podstate's cache directory,
a name a line, the newest last, at most ``KEEP``; one that cannot be read or written costs
the check again, nothing more. What is named is the vars files' own content, which this
machine holds as it is: no secret value is in it (the state says where each is read from,
and it is read later, in ``spec.normalize``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from podstate.gzcache import cache_dir

KEEP = 512


def _path() -> Path:
    return cache_dir() / "passed-states"


def name(schema: str, state: dict[str, Any]) -> str | None:
    """Return the state's name under ``schema``; None for a state JSON cannot write (a date
    YAML read), which is checked at every run."""
    try:
        text = json.dumps(state, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    digest = hashlib.sha256(schema.encode())
    digest.update(b"\0" + text.encode())
    return digest.hexdigest()


def _names() -> list[str]:
    try:
        return _path().read_text().split()
    except (OSError, UnicodeDecodeError):
        return []


def known(state_name: str) -> bool:
    """True when the state named ``state_name`` passed the schema before."""
    return state_name in _names()


def add(state_name: str) -> None:
    """Keep ``state_name`` as passed: the list is written anew beside itself and renamed into
    place, so a run never reads half of it; two runs adding at once may lose one name, which
    costs its check again."""
    names = [n for n in _names() if n != state_name][-(KEEP - 1) :] + [state_name]
    path = _path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "w") as out:
                out.write("".join(f"{n}\n" for n in names))
            os.replace(temp, path)
        except OSError:
            os.unlink(temp)
            raise
