"""How a file's content travels in a write command (scripts/write_file.sh): as one sh word,
never read by a shell as code: the bytes themselves, their base64, or what puts them
together from files on the pod."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence

from podstate.shell import b64


def content_word(text: str) -> str:
    """Return ``text`` as one sh word that is "=" and ``text`` itself, quoted, where the text
    has no byte a shell word cannot hold (``plain``) and that is no longer than its base64
    (or 64 bytes): so a write decodes nothing; else ``text``'s base64. A command that holds
    it is never longer than with its base64 but for those 64 bytes (``podstate.pod.fits``)."""
    encoded = b64(text)
    quoted = shlex.quote("=" + text)
    return quoted if plain(text) and len(quoted) <= max(len(encoded), 64) else encoded


def composed_word(content: str, copied: Sequence[tuple[str, str]]) -> str | None:
    """Return ``content`` as one sh word that tells scripts/write_file.sh to put it together
    on the pod: "+", its last line, the number of ``copied`` files and each one's path (a
    line each), then what comes before their contents, which the pod's files give (one
    ``cat``); None unless ``content`` ends with their contents and one line (and no path
    holds a newline). A file that no longer holds what it did fails the write."""
    if not copied:
        return None
    head, found, tail = content.rpartition("".join(text for _, text in copied))
    paths = [path for path, _ in copied]
    whole = found and tail.count("\n") == 1 and tail.endswith("\n")
    if not whole or any("\n" in p for p in paths) or not plain(head + tail + "".join(paths)):
        return None
    return shlex.quote("+" + tail + f"{len(paths)}\n" + "".join(f"{p}\n" for p in paths) + head)


def plain(text: str) -> bool:
    """Return whether ``text`` can be a shell word as it is: no NUL, and UTF-8 (no bytes
    that are not, which travel as surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in text


def sha256(text: str) -> str:
    """Return the hex SHA-256 of ``text`` as the pod's bytes (surrogates back to bytes)."""
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
