"""The probe's venv section: what is at the venv's path, its interpreter, uv and snapshot.

What a podstate venv leaves on the pod for the probe to read is defined here: the record
file in each venv (``VENV_RECORD``), the snapshot directory's ``current`` file
(``SNAPSHOT_CURRENT``, written by podstate.operations.venv, read by ``read_snapshot``) and
the distribution names the probe looks for (``normalize``).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

from podstate.facts.decode import by_key, decode
from podstate.facts.section import Argument, Section
from podstate.shell import quote_path, script

# The file in every podstate venv that records what it was built from (its fingerprint).
VENV_RECORD = ".podstate-venv"

# The file in a snapshot directory that names its complete snapshot: one line of
# SNAPSHOT_FIELDS separated by single spaces (the archive is a file name in that directory,
# the compressor ``zstd`` or ``gzip``, sha256 the archive's, in hex). Written last, after
# the archive is in place; scripts/venv_snapshot.sh appends the sha256 it took while
# writing the archive.
SNAPSHOT_CURRENT = "current"
SNAPSHOT_FIELDS = ("fingerprint", "archive", "compressor", "sha256")

# Run by the pod's interpreter for the venv role: its real path, version, and whether it has
# ensurepip (``python -m venv`` needs it to seed pip). One line each; no newline in any.
_PYTHON_INFO = (
    "import importlib.util, os, sys; print(os.path.realpath(sys.executable)); "
    "print(sys.version.replace(chr(10), ' ')); "
    "print(int(importlib.util.find_spec('ensurepip') is not None))"
)


@dataclass(frozen=True)
class Snapshot:
    """A snapshot directory's complete snapshot, as its ``current`` file names it."""

    fingerprint: str  # the fingerprint of the venv it holds
    archive: str  # the archive's file name in that directory (or its path, for a restore)
    compressor: str  # "zstd" | "gzip"
    sha256: str  # the archive's, in hex


@dataclass(frozen=True)
class Python:
    """The interpreter the venv is built with, as the pod runs it."""

    executable: str  # its real path
    version: str  # sys.version, on one line
    ensurepip: bool  # it has ensurepip (``python -m venv`` needs it to seed pip)


@dataclass(frozen=True)
class VenvState:
    """What the probe read for the venv role."""

    kind: str | None  # what is at the venv's path: link | directory | file; None: nothing
    target: str | None  # the link's target (".venv-0123abcd4567"), None if not a link
    record: str | None  # path/.podstate-venv (the fingerprint), None if absent
    works: bool  # path/bin/python starts
    # requested distributions without a *.dist-info in its site-packages; None: nothing there
    missing: tuple[str, ...] | None
    python: Python | None  # None: the interpreter is not on the pod
    uv: str | None  # uv on PATH, None if there is none
    managed_uv: bool  # podstate's own uv is where the request's ``uv`` says
    zstd: bool  # the zstd command is there
    free: int | None  # bytes free where the venv is built, None if unknown
    snapshot: Snapshot | None  # None: no complete snapshot


@dataclass(frozen=True)
class VenvRequest:
    """What the venv section reads (``Request.venv``), as the venv role asks it."""

    path: str  # the venv symlink
    python: str  # the interpreter to find
    uv: str  # where podstate keeps its own uv
    distributions: str  # normalized names separated by spaces, looked for in site-packages
    snapshot: str | None = None  # the snapshot directory; None: none is read


def sent(asked: VenvRequest | None) -> dict[str, str] | None:
    """Return the probe's ``venv`` argument for ``asked`` (``probe_lines``' ``venv``), the
    plain dict pyinfra's fact is called with: its fields, ``snapshot`` only where set."""
    if asked is None:
        return None
    plain = {
        "path": asked.path,
        "python": asked.python,
        "uv": asked.uv,
        "distributions": asked.distributions,
    }
    if asked.snapshot:
        plain["snapshot"] = asked.snapshot
    return plain


def probe_lines(venv: dict[str, str]) -> list[str]:
    """Return the probe lines the venv role reads (``venv.*`` and ``arch``), read-only.

    ``venv`` has ``path`` (the venv symlink), ``python`` (the interpreter to find),
    ``uv`` (where podstate keeps its own uv), ``distributions`` (normalized names separated
    by spaces, looked for in the venv's site-packages without starting Python) and
    optionally ``snapshot`` (a directory).
    """
    p, uv = quote_path(venv["path"]), quote_path(venv["uv"])
    lines = [
        'echo "arch $(uname -m)"',
        f'if [ -L {p} ]; then echo "venv.kind link $(readlink -- {p} | b64)"; '
        f"elif [ -d {p} ]; then echo 'venv.kind directory'; "
        f"elif [ -e {p} ]; then echo 'venv.kind file'; fi",
        f'if [ -f {p}/{VENV_RECORD} ]; then echo "venv.record $(b64 < {p}/{VENV_RECORD})"; fi',
        f"if {p}/bin/python -c '' >/dev/null 2>&1; then echo 'venv.works 1'; fi",
        script("venv_missing.sh"),
        f'if [ -d {p} ]; then echo "venv.missing$(venv_missing {p}'
        f' {shlex.quote(venv.get("distributions", ""))})"; fi',
        f"if i=$(command -v {shlex.quote(venv['python'])}); then"
        f' echo "venv.python $("$i" -c {shlex.quote(_PYTHON_INFO)} 2>/dev/null | b64)"; fi',
        'if u=$(command -v uv); then echo "venv.uv $(printf %s "$u" | b64)"; fi',
        f"if [ -x {uv} ]; then echo 'venv.managed_uv 1'; fi",
        "if command -v zstd >/dev/null 2>&1; then echo 'venv.zstd 1'; fi",
        # Free space where the venv will be built: its parent, or the nearest existing ancestor.
        f"d={quote_path(posixpath.dirname(venv['path']) or '/')}; "
        'while [ ! -d "$d" ]; do d=$(dirname -- "$d"); done; '
        'echo "venv.free $(stat -f -c "%S %a" "$d" 2>/dev/null)"',
    ]
    if venv.get("snapshot"):
        s = quote_path(venv["snapshot"])
        lines.append(
            f"if [ -f {s}/{SNAPSHOT_CURRENT} ] && read -r f a z h < {s}/{SNAPSHOT_CURRENT}"
            f' && [ -f {s}/"$a" ]; then'
            f' echo "venv.snapshot $(printf \'%s %s %s %s\' "$f" "$a" "$z" "$h" | b64)"; fi'
        )
    return lines


def normalize(name: str) -> str:
    """Return a distribution name as installers compare them (PEP 503): lower case, each
    run of ``-``, ``_`` and ``.`` one ``-``; what scripts/venv_missing.sh makes of the
    names of ``*.dist-info`` directories, so the two can be compared."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_snapshot(line: str) -> Snapshot | None:
    """Return a ``current`` line's :class:`Snapshot` (None unless it has all of
    ``SNAPSHOT_FIELDS``)."""
    values = line.removesuffix("\n").split(" ")
    if len(values) != len(SNAPSHOT_FIELDS) or not all(values):
        return None
    return Snapshot(*values)


def parse(output: list[str]) -> VenvState:
    """Return the probe's :class:`VenvState` from its ``venv.*`` lines."""
    fields = by_key(output)
    kind, _, target = fields.get("kind", "").partition(" ")
    python = decode(fields.get("python", "")).splitlines()
    free = fields.get("free", "").split()
    return VenvState(
        kind=kind or None,
        target=decode(target).removesuffix("\n") if kind == "link" else None,
        record=decode(fields["record"]) if "record" in fields else None,
        works=fields.get("works") == "1",
        missing=tuple(fields["missing"].split()) if "missing" in fields else None,
        python=(
            Python(executable=python[0], version=python[1], ensurepip=python[2] == "1")
            if len(python) >= 3
            else None
        ),
        uv=decode(fields.get("uv", "")) or None,
        managed_uv=fields.get("managed_uv") == "1",
        zstd=fields.get("zstd") == "1",
        free=int(free[0]) * int(free[1]) if len(free) == 2 else None,
        snapshot=read_snapshot(decode(fields.get("snapshot", ""))),
    )


SECTION = Section(
    "venv",
    fields=("arch", "venv"),
    parse=lambda answer: {
        "arch": answer.value("arch") or None,
        "venv": parse(answer.lines("venv")) if "arch" in answer else None,
    },
    lines=lambda arguments: probe_lines(arguments["venv"]) if arguments["venv"] else (),
    arguments=(Argument("venv", sent=sent),),
)
