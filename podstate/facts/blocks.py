"""podstate's blocks in a user's file (``~/.bashrc``, ``~/.zshenv``, ``~/.ssh/authorized_keys``):
which of its lines are podstate's, by the one rule that all code editing them follows (the
env and authorized_keys roles, the removal, and the boot hook's awk in scripts/boot.sh).

A block is a line that starts with the begin mark, then lines that start with neither mark,
then a line that starts with the end mark: all of it is podstate's. A line that starts with a
mark and is in no block is a lone mark (the rest of its block was deleted by hand, or the
marks were doubled or reversed): the mark is podstate's, but which lines beside it were in
its block cannot be told, so they are all the user's, and the block cannot be mended (podstate
says so, with the line). Every other line is the user's: kept byte for byte, in order. A line
ends at ``\\n`` alone (a ``\\r`` before it is part of the line), as the shells read it.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_SAID = 3  # the lone marks a message names, of all those found


class Split(NamedTuple):
    """A user's file split by the rule above: ``lines``, the user's lines (each with its
    ``\\n``; the file's last line perhaps without); ``at``, the index in ``lines`` where the
    first begin mark stood (of a block or a lone one; None: there is none); ``lone``, each
    lone mark as its line number (from 1) and ``begin`` or ``end``."""

    lines: tuple[str, ...]
    at: int | None
    lone: tuple[tuple[int, str], ...]


def lines_of(text: str) -> list[str]:
    """Return ``text``'s lines, each with its ``\\n`` (the last one without, where the text
    does not end in one): ``str.splitlines`` would also split at ``\\r`` and other
    characters that end no line for a shell or for sshd."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def split(text: str, begin: str, end: str) -> Split:
    """Return ``text`` split into the user's lines and podstate's, by the rule above."""
    lines: list[str] = []
    held: list[str] = []  # the lines after a begin mark, until a mark says whose they are
    opened = 0  # the line number of that begin mark; 0: none
    at: int | None = None
    lone: list[tuple[int, str]] = []
    for number, line in enumerate(lines_of(text), start=1):
        if line.startswith(begin):
            if opened:  # another begin mark first: the open one is lone, its lines the user's
                lone.append((opened, "begin"))
                lines += held
            at = len(lines) if at is None else at
            opened, held = number, []
        elif line.startswith(end):
            if opened:
                opened, held = 0, []
            else:
                lone.append((number, "end"))
        elif opened:
            held.append(line)
        else:
            lines.append(line)
    if opened:
        lone.append((opened, "begin"))
        lines += held
    return Split(tuple(lines), at, tuple(sorted(lone)))


def lost(path: str, begin: str, end: str, lone: tuple[tuple[int, str], ...]) -> str:
    """Return, in words, which of the marks of podstate's block in ``path`` are lone
    (``lone``: ``split``'s), with their line numbers: what a violation says first."""
    said = []
    for number, which in lone[:MAX_SAID]:
        if which == "begin":
            said.append(
                f"podstate's block in {path} has lost its end mark: line {number} begins it "
                f"({begin!r}), and no line starting with {end!r} ends it"
            )
        else:
            said.append(
                f"podstate's block in {path} has lost its begin mark: line {number} ends it "
                f"({end!r}), and no line starting with {begin!r} begins it"
            )
    more = len(lone) - MAX_SAID
    return "; ".join(said) + (f" (and {more} more such marks)" if more > 0 else "")
