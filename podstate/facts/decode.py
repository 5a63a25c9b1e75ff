"""How the probe sends a value: one word, that every section's parser reads back with ``decode``."""

from __future__ import annotations

import base64


def decode(data: str) -> str:
    """Return a probe value as text: ``=`` then the value itself (the probe's ``enc`` for a
    plain value), else base64, whose bytes that are not UTF-8 survive as surrogates, so a
    file written back from it is byte-for-byte what was read."""
    if data.startswith("="):
        return data[1:]
    return base64.b64decode(data, validate=True).decode("utf-8", "surrogateescape")


def by_key(lines: list[str]) -> dict[str, str]:
    """Return a section's ``SECTION.KEY VALUE`` lines as ``{KEY: VALUE}`` (the last of a
    key's lines wins), for the parsers that read a section field by field."""
    found = {}
    for line in lines:
        key, _, rest = line.partition(" ")
        found[key.partition(".")[2]] = rest
    return found
