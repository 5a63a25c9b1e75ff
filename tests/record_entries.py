"""Record entries for tests, written as a record's line writes them: a kind, a path and the
words after it (podstate.facts.record's classes, one per kind)."""

from __future__ import annotations

from podstate.facts.record import Entry, parse_entry


def entry(kind: str, path: str, *words: str) -> Entry:
    """Return the entry of ``kind`` at ``path`` whose line has ``words`` after the path."""
    made = parse_entry(kind, path, words)
    if made is None:
        raise ValueError(f"not the words of a {kind} entry: {words}")
    return made
