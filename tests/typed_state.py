"""A typed desired state for tests that call a role, from a dict as a vars file writes it.

The dict goes through the same normalizer as every pod's (``spec.normalize``: sizes in
bytes, paths normalized, defaults filled), without the schema, then ``typed.build``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podstate.desired.spec import normalize
from podstate.desired.state import State, Venv
from podstate.desired.typed import build


def state(raw: dict[str, Any], root: Path | None = None) -> State:
    """Return the State of ``raw``, a desired state as a vars file writes it; ``root`` is
    where its relative file names (``venv.requirements``, ``files.*.src``) are read."""
    return build(normalize(raw, root))


def venv(**section: Any) -> Venv:
    """Return the ``venv`` section ``section`` (as a vars file writes it) normalized; its
    path is /opt/venv unless given."""
    built = state({"venv": {"path": "/opt/venv", **section}}).venv
    assert built is not None
    return built
