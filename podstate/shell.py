"""Quoting for the sh commands podstate sends: values travel as data, never as code."""

from __future__ import annotations

import base64
import shlex


def quote_path(path: str) -> str:
    """Return ``path`` quoted for sh; a leading ``~`` means the SSH user's home."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def b64(text: str) -> str:
    """Return ``text`` base64-encoded: how any content reaches a pod without a shell reading it."""
    return base64.b64encode(text.encode()).decode()
