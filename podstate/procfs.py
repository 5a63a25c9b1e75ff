"""Text the Linux kernel writes under /proc, as podstate reads it."""

from __future__ import annotations

import re


def unescape(field: str) -> str:
    """Undo the octal escapes (``\\040`` for a space) of /proc/mounts and mountinfo fields."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)
