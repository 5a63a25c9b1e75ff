"""Text from pods, made safe to show: a hostile pod must not drive the operator's terminal."""

from __future__ import annotations

import unicodedata


def visible(text: str) -> str:
    """Return ``text`` with every control character but newline and tab written as ``\\xNN``.

    Escape sequences (``ESC ] 0 ;`` retitles a terminal, ``ESC [ 2 J`` clears it) then show
    as text instead of acting. Bytes that were not UTF-8 (kept as surrogates by the probe)
    show the same way.
    """
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, see probe._decode
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch not in "\n\t" and unicodedata.category(ch) == "Cc":
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    return "".join(out)
