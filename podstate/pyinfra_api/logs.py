"""pyinfra's log lines: what podstate reads in their text (a pod's prefix, the SSH
connector's advice)."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def pod_line(message: str) -> tuple[str, str] | None:
    """Return the pod and the text of a pyinfra log line about one pod (``[pod] text``, the
    print prefix, colours removed), None for any other line."""
    found = re.match(r"^\[([^\]]+)\]\s*(.*)$", _ANSI.sub("", message).strip(), re.S)
    return (found.group(1), found.group(2).strip()) if found else None


def removal_hint(message: str) -> str | None:
    """Return the ``[host]:port`` of pyinfra's changed-host-key advice (``ssh-keygen -R
    ADDRESS``, a log line of its SSH connector), None for any other line."""
    found = re.match(r"^\s*ssh-keygen -R (\S+)\s*$", message)
    return found.group(1) if found else None
