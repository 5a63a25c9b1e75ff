"""JSON files written in one step: a reader never sees half a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any, indent: int = 2, sort_keys: bool = False) -> None:
    """Write ``data`` to ``path`` as JSON, replacing the old file in one step.

    The parent directory is created when missing; the text goes to ``<name>.tmp`` first.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n")


def replace_text(path: Path, text: str) -> None:
    """Write ``text`` to ``<name>.tmp`` beside ``path``, then move it over ``path`` in one
    step; OSError as the write or the move raises it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
