"""The probe's values sent once, at its end (scripts/enc.sh's spool_end): each ``@N`` word of
its lines is the Nth value kept by ``enc`` (or a file's content, by ``enc_file``), and one
base64 sends every value, the environments the processes section asked for and one tar of
the files, however many there are.

``resolve`` puts each value in its word's place as the base64 that ``decode`` reads, so
every section's parser reads the lines it would read had each value been sent on its own.
Every part of the stream marks its own end (a NUL byte after each value and environment
entry, tar's header before each file's bytes): a size read apart from the read (a network
volume's cached attributes) is never trusted to cut it.
"""

from __future__ import annotations

import base64
import io
import re
import tarfile

_REF = re.compile(r"@[0-9]+")
# Lines whose words are the pod's own text, never a value's word.
_RAW = ("lock.owner",)
ENVIRON = "environ"  # the proc line's word for its environment (podstate.facts.processes)
# What grep reads of its own environment before the processes': without it, no environment
# was read (a grep without -z -Z), and no process may be taken for one without a variable.
READ_MARK = ("/proc/self/environ", b"PODSTATE_SPOOL=1")


def split(data: bytes, count: int) -> tuple[list[bytes], dict[str, list[bytes]], bytes]:
    """Return the spool's ``count`` values, the environments' entries by file
    (``/proc/PID/environ``) and the tar after them, from its decoded ``data``; ValueError
    when it is cut short."""
    parts = data.split(b"\0", count)
    if len(parts) <= count:
        raise ValueError("the probe's spool is cut short")
    values, rest = parts[:count], parts[count]
    environ: dict[str, list[bytes]] = {}
    while True:
        name, sep, rest = rest.partition(b"\0")
        if not sep:
            raise ValueError("the probe's spool is cut short")
        if not name:
            return values, environ, rest
        entry, sep, rest = rest.partition(b"\0")
        if not sep:
            raise ValueError("the probe's spool is cut short")
        environ.setdefault(name.decode("utf-8", "surrogateescape"), []).append(entry)


def contents(archive: bytes) -> dict[str, bytes]:
    """Return each regular file's content in the spool's tar by its name (the path it was
    asked by); a member that is no regular file (what was there changed) is left out."""
    if not archive:
        return {}
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:", encoding="utf-8") as tar:
            for member in tar:
                if member.name in found or not (member.isreg() or member.islnk()):
                    continue
                data = tar.extractfile(member)
                if data is not None:
                    found[member.name] = data.read()
    except (tarfile.TarError, KeyError) as e:
        raise ValueError(f"the probe's files cannot be read back ({e})") from None
    return found


def resolve(output: list[str]) -> list[str]:
    """Return the probe's lines without the spool's, each ``@N`` word the base64 of its value,
    a ``file`` line whose content did not come (the file could not be read, or was no
    regular file; where tar said one changed while it read it, every file's content is the
    one read again on its own) ``unreadable``, and a ``proc`` line's
    ``environ`` word its entries (a process without any is left out); the lines unchanged
    when there is no spool (a probe of a section alone). ValueError when the spool is cut
    short, or the processes' environments could not be read: a process is then never taken
    for one that sets none of the variables."""
    heads = {line.partition(" ")[0]: line for line in output if line.startswith("spool")}
    if "spool" not in heads:
        return output
    count = int(heads["spool"].split(" ")[1])
    files = set(heads.get("spool.files", "").split(" ")[1:])
    if "spool.data" not in heads:
        raise ValueError("the probe's spool is cut short")
    data = base64.b64decode(heads["spool.data"].partition(" ")[2], validate=True)
    values, environ, archive = split(data, count)
    encoded: dict[str, str | None] = {}
    if "spool.changed" in heads:  # each file read again on its own: what tar read is not
        read: dict[str, bytes] = {}
        for line in output:
            if line.startswith("spool.file "):
                _, item, content_b64 = line.split(" ", 2)
                encoded[f"@{item}"] = content_b64
    else:
        read = contents(archive)
    for number, value in enumerate(values, 1):
        if str(number) in files:
            content = read.get(value.decode("utf-8", "surrogateescape"))
            if content is not None:
                encoded[f"@{number}"] = base64.b64encode(content).decode()
            else:
                encoded.setdefault(f"@{number}", None)
        else:
            encoded[f"@{number}"] = base64.b64encode(value).decode()
    if any(line.startswith("proc ") and line.endswith(f" {ENVIRON}") for line in output) and (
        READ_MARK[1] not in environ.get(READ_MARK[0], [])
    ):
        raise ValueError("the pod's grep could not read processes' environments (needs -z -Z)")
    lines = []
    for line in output:
        if line.startswith("spool"):
            continue
        if line.startswith("proc "):
            read_line = _proc(line, environ)
            if read_line is None:
                continue
            line = read_line
        if "@" in line and not line.startswith(_RAW):
            line = _words(line, encoded)
        lines.append(line)
    return lines


def _words(line: str, encoded: dict[str, str | None]) -> str:
    """Return ``line`` with each of its ``@N`` words in base64; a file whose content did not
    come is unreadable, without a content."""
    words = line.split(" ")
    for i, word in enumerate(words):
        if not _REF.fullmatch(word):
            continue
        if word not in encoded:
            raise ValueError(f"the probe's spool has no value {word}")
        value = encoded[word]
        if value is None:
            if words[0] != "file" or i != len(words) - 1 or words[2] != "file":
                raise ValueError(f"the probe's spool has no file {word}")
            return " ".join(["file", words[1], "unreadable", *words[3:-1]])
        words[i] = value
    return " ".join(words)


def _proc(line: str, environ: dict[str, list[bytes]]) -> str | None:
    """Return a ``proc PID COMM environ`` line with its environment's entries (those the
    probe asked for, one a line, in base64), None when it has none."""
    words = line.split(" ")
    if words[-1] != ENVIRON:
        return line
    entries = environ.get(f"/proc/{words[1]}/environ")
    if not entries:
        return None
    words[-1] = base64.b64encode(b"\n".join(entries)).decode()
    return " ".join(words)
