"""The sections that bring content from the control machine, read and checked here, once:
the venv (its requirements file), files (their content or src) and authorized_keys.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from podstate.desired import secret
from podstate.desired.errors import SpecError, short
from podstate.desired.load import READ_MAX, TooLarge, display_path, read_bounded
from podstate.desired.sections import CREDENTIAL, CREDENTIAL_FIX, normpath
from podstate.limits import MAX_FILE
from podstate.paths import ENV_FILES

REQUIREMENTS_INCLUDES = ("-r", "--requirement", "-c", "--constraint")


def venv(item: dict[str, Any], root: Path) -> dict[str, Any]:
    """Return the normalized ``venv`` section, with the requirements file's content in it."""
    path = normpath(item["path"])
    if path == "/":
        raise SpecError("venv.path: must name a directory below /, such as /opt/venv")
    requirements = None
    if "requirements" in item:
        requirements = _requirements(root / item["requirements"], item["requirements"])
    snapshot = normpath(item["snapshot"]) if "snapshot" in item else None
    if snapshot and (snapshot == path or snapshot.startswith(path + "/")):
        raise SpecError(f"venv.snapshot: {snapshot} is inside venv.path {path}")
    return {
        "path": path,
        "python": item.get("python", "python3"),
        "packages": [" ".join(p.split()) for p in item.get("packages", [])],
        "requirements": requirements,
        "requirements_file": item.get("requirements"),
        "installer": item.get("installer", "uv"),
        "index_url": item.get("index_url"),
        "extra_index_urls": list(item.get("extra_index_urls", [])),
        "find_links": [
            normpath(link) if link.startswith("/") else link for link in item.get("find_links", [])
        ],
        "no_index": bool(item.get("no_index", False)),
        "snapshot": snapshot,
        "seed": bool(item.get("seed", True)),
        "compile": bool(item.get("compile", True)),
    }


def _requirements(path: Path, name: str) -> str:
    """Return a requirements file's text; SpecError for what the installer could not use."""
    try:
        text = read_bounded(path, READ_MAX).decode("utf-8")
    except TooLarge as e:
        raise SpecError(
            f"venv.requirements: {name}: {e.size} bytes, more than the {READ_MAX} podstate "
            "reads of a requirements file: is it the right file?"
        ) from None
    except OSError as e:
        raise SpecError(
            f"venv.requirements: cannot read {name} ({display_path(path)}): {e.strerror or e}"
        ) from None
    except UnicodeDecodeError:
        raise SpecError(f"venv.requirements: {name} is not UTF-8 text") from None
    for number, line in enumerate(text.splitlines(), start=1):
        option = line.strip().split("=", 1)[0].split(" ", 1)[0]
        if option in REQUIREMENTS_INCLUDES:
            raise SpecError(
                f"venv.requirements: {name} line {number}: {option} names another file, which "
                "the pod does not have; put its lines in this file or in venv.packages"
            )
        if "\0" in line:
            raise SpecError(f"venv.requirements: {name} line {number}: contains a NUL byte")
        if secret.has_credential(line):
            raise SpecError(
                f"venv.requirements: {name} line {number}: {CREDENTIAL}{CREDENTIAL_FIX['venv']}"
            )
    return text


def files(items: dict[str, dict[str, str]], root: Path) -> dict[str, dict[str, str]]:
    """Return the ``files`` section: path -> ``content`` (a ``src`` read here, byte for byte)
    and ``mode`` as ``stat`` prints it ("644"). A SpecError names the path and the problem."""

    out = {}
    for name, item in items.items():
        path = normpath(name)
        if path in [normpath(p.replace("~", "/root", 1)) for p in ENV_FILES]:
            raise SpecError(
                f"files: {path}: podstate keeps its environment hook there; put your lines in "
                "a file of their own"
            )
        if ("content" in item) == ("src" in item):
            raise SpecError(f"files: {path}: give either content or src (a file to copy)")
        try:
            content = item.get("content")
            if content is None:
                content = _read_src(root / item["src"], item["src"], path, MAX_FILE)
            size = len(content.encode("utf-8", "surrogateescape"))
            if size > MAX_FILE:
                raise TooLarge(size)
        except TooLarge as e:
            raise SpecError(
                f"files: {path}: {e.size} bytes, more than the {MAX_FILE} podstate writes in "
                "one command; put big files on the volume"
            ) from None
        out[path] = {"content": content, "mode": format(int(item.get("mode", "0644"), 8), "o")}
    return out


def _read_src(source: Path, name: str, path: str, limit: int) -> str:
    """Return the content of ``files.<path>.src`` (``source``, named ``name``), byte for byte;
    TooLarge, before reading it, past ``limit`` bytes."""
    try:
        return read_bounded(source, limit).decode("utf-8", "surrogateescape")
    except OSError as e:
        raise SpecError(
            f"files: {path}: cannot read src {name} ({display_path(source)}): {e.strerror or e}"
        ) from None


def authorized_keys(lines: list[str]) -> list[str]:
    """Return the ``authorized_keys`` lines with single spaces, each key once; SpecError when
    a key's data is not base64 of a key of the type its line names (a key pasted whole
    always is; a cut or mixed-up one is not)."""
    keys: dict[tuple[str, str], str] = {}
    for number, line in enumerate(lines, start=1):
        kind, data, *comment = line.split()
        try:
            blob = base64.b64decode(data, validate=True)
            length = int.from_bytes(blob[:4], "big")
            inner = blob[4 : 4 + length].decode("ascii")
        except (ValueError, UnicodeDecodeError):
            inner = ""
        if inner != kind:
            said = f"data of a {inner} key" if inner.isprintable() and inner else "no key data"
            raise SpecError(
                f"authorized_keys: entry {number} ({short(' '.join(comment) or data[:20])}) "
                f"says {kind} but holds {said}: paste the whole .pub line"
            )
        keys.setdefault((kind, data), " ".join([kind, data, *comment]))
    return list(keys.values())
