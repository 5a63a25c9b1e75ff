"""The probe's values sent once, at its end (scripts/enc.sh): each ``@N`` word of its lines is
the Nth value of the spool, which one ``od`` encodes for every value (no process per value).

``resolve`` puts each value in its word's place, as the base64 that ``decode`` reads, so every
section's parser reads a value the same way however the probe sent it.
"""

from __future__ import annotations

import base64
import re

_REF = re.compile(r"@[0-9]+")
_HEX = re.compile(r"[0-9a-f ]*")  # od's lines
# Lines whose words are the pod's own text, never a value's reference.
_RAW = ("lock.owner",)


def values(header: str, hex_lines: list[str]) -> dict[str, bytes]:
    """Return the spool's values by their words (``@0``: the first file, the mounts) from its
    ``spool N F:SIZE...`` line and od's lines after it; ValueError when they do not add up
    (od missing, or a file whose size changed between its stat and its read)."""
    words = header.split(" ")[1:]
    count, files = int(words[0]), dict(word.split(":") for word in words[1:])
    data = bytes.fromhex("".join("".join(line.split()) for line in hex_lines))
    found: dict[str, bytes] = {}
    at = 0
    for number in ["0", *(str(n) for n in range(1, count + 1) if str(n) not in files)]:
        end = data.find(b"\0", at)
        if end < 0:
            raise ValueError("the probe's spool is cut short")
        found["@" + number] = data[at:end]
        at = end + 1
    for number, size in files.items():
        found["@" + number] = data[at : at + int(size)]
        at += int(size)
    if at != len(data):
        raise ValueError("a file changed while the probe read it")
    return found


def resolve(output: list[str]) -> list[str]:
    """Return the probe's lines without the spool (its line and od's after it), each ``@N``
    word the base64 of its value (the lines unchanged when there is no spool: a probe of a
    section alone)."""
    starts = [i for i, line in enumerate(output) if line.startswith("spool ")]
    if not starts:
        return output
    start = end = starts[-1] + 1
    while end < len(output) and _HEX.fullmatch(output[end]):
        end += 1
    found = values(output[starts[-1]], output[start:end])
    encoded = {word: base64.b64encode(value).decode() for word, value in found.items()}

    def word(match: re.Match[str]) -> str:
        return encoded[match[0]]

    lines = []
    for line in [*output[: starts[-1]], *output[end:]]:
        if "@" in line and not line.startswith(_RAW):
            line = " ".join(_REF.sub(word, w) if _REF.fullmatch(w) else w for w in line.split(" "))
        lines.append(line)
    return lines
