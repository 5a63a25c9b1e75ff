"""Byte sizes as users write them (``64M``, ``16G``) and as pods report them."""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
# A size as users write it: digits (with a decimal part or not), at most one space, then
# nothing or B (bytes), or a unit K, M, G, T or P (powers of 1024, upper case) with B or iB
# after it or not: 64M, 16GB, 16GiB, 1.5T, 512 M. The schema's pattern is this one (the
# validator searches with Python's re, whose $ also matches before a last newline).
SIZE_PATTERN = r"^([0-9]+(?:\.[0-9]+)?) ?(?:([KMGTP])(?:i?B)?|B)?$(?!\n)"
# What SIZE_PATTERN accepts, in words, for the schema's message and the docs.
SIZE_WORDS = (
    "bytes as an integer, or a number (decimals allowed) then, after at most one space, "
    "B or nothing for bytes, or a unit K, M, G, T or P (powers of 1024, upper case: not 16g) "
    "with B or iB after it or not: 64M, 16G, 16GB, 16GiB, 1.5T, 512 M"
)
_SIZE_RE = re.compile(SIZE_PATTERN)


def parse_size(value: int | str) -> int:
    """Return ``value`` in bytes: an integer is bytes, a string is ``SIZE_PATTERN``'s (``16G``),
    a decimal part rounded down to whole bytes.

    Raises ValueError for anything else, so the schema and the roles agree on what a size is.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value!r} is not a size")
        return value
    match = _SIZE_RE.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"{value!r} is not a size")
    return int(float(match.group(1)) * _UNITS[match.group(2) or ""])


def parse_mount_size(text: str) -> int:
    """Return a size as mount(8) takes it and /proc/mounts shows it (``65536k``, ``24G``).

    The same binary units as ``parse_size``, in either case; ValueError for anything else.
    """
    try:
        return parse_size(text.upper())
    except ValueError:
        raise ValueError(f"{text!r} is not a size") from None


def format_size(size: int) -> str:
    """Return ``size`` bytes as the shortest exact binary-unit string (``16G``), else ``12.3M``."""
    for unit in ("P", "T", "G", "M", "K"):
        if size >= _UNITS[unit] and size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    for unit in ("P", "T", "G", "M", "K"):
        if size >= _UNITS[unit]:
            return f"{size / _UNITS[unit]:.1f}{unit}"
    return f"{size}B"
