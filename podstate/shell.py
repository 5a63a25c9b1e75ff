"""Quoting for the sh commands podstate sends: values travel as data, never as code."""

from __future__ import annotations

import base64
import shlex
from functools import cache
from pathlib import Path


def quote_path(path: str) -> str:
    """Return ``path`` quoted for sh; a leading ``~`` means the SSH user's home."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def b64(text: str) -> str:
    """Return ``text`` base64-encoded: how any content reaches a pod without a shell reading it."""
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode()


@cache
def script(name: str) -> str:
    """Return podstate's shell script ``scripts/<name>`` without comments and blank lines.

    The scripts live in files so that shellcheck reads them; they travel inside a command,
    so only the code is sent.
    """
    text = (Path(__file__).parent / "scripts" / name).read_text()
    return "".join(line for line in text.splitlines(keepends=True) if line.strip()[:1] not in "#")


def script_file(name: str) -> str:
    """Return podstate's script ``scripts/<name>`` whole: one installed on pods as a command."""
    return (Path(__file__).parent / "scripts" / name).read_text()
