"""The probe's paths and files: what is at each directory and managed file the roles name.

A path (``path`` lines) is read for its kind, mode, real path and the mount that holds it;
a file (``file`` lines, scripts/file_state.sh) for what is there, its mode and owner (a file
podstate writes over keeps them for the user's file it puts back), with its whole content
when it is a readable file of at most ``MAX_FILE``. All are stat'ed in one call
(scripts/stats.sh), following symbolic links; a path that is one is named so by the shell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from podstate.facts.decode import decode
from podstate.facts.mounts import Mount, mount_of
from podstate.facts.section import REQUIRED, Argument, Section
from podstate.limits import MAX_FILE
from podstate.shell import b64, quote_path, script
from podstate.sizes import format_size

# What the probe's one stat reads of each path and file: mode, owner, size and kind.
STAT = "%a %u:%g %s %F"


@dataclass(frozen=True)
class FileInfo:
    """What is at a managed file's path; a symbolic link is followed to its target."""

    state: str  # file | absent | dangling | loop | large | unreadable | directory | fifo | ...
    link: bool = False  # the path is a symbolic link
    target: str = ""  # the resolved path (the path itself when it is no link)
    mode: str | None = None  # octal permissions of the file, e.g. "644"
    owner: str | None = None  # its owner and group, "UID:GID"
    size: int | None = None  # bytes
    content: str | None = None  # the whole content, for a readable file of at most MAX_FILE

    def describe(self) -> str:
        """Return what is at the path in words, for a message: "a directory", "a link to …"."""
        what = {
            "file": "a regular file",
            "absent": "nothing",
            "large": f"a file of {format_size(self.size or 0)}",
            "unreadable": "a file podstate cannot read",
        }.get(self.state, "a " + self.state.replace("_", " "))
        if not self.link:
            return what
        link = f"a symbolic link to {self.target or '?'}"
        return {
            "file": link,
            "dangling": f"{link}, which does not exist",
            "loop": f"{link}, which does not resolve (a link loop, or a missing directory)",
        }.get(self.state, f"{link}, which is {what}")


@dataclass(frozen=True)
class PathInfo:
    """What is at a directory's path the roles name (``path`` lines)."""

    kind: str | None  # what stat calls it: "directory", "regular file", ...; None: absent
    mode: str | None  # octal permissions, e.g. "1777"; None when absent
    real: str  # the resolved path (the path itself while it is absent)
    mount: Mount | None  # the mount that holds ``real``


def probe_lines(paths: list[str], files: list[str]) -> list[str]:
    """Return the probe lines that read ``paths`` (``path NAME REAL MODE:KIND``) and
    ``files`` (``file NAME STATE LINK TARGET [MODE UID:GID SIZE [CONTENT]]``), read-only."""
    out = [script("stats.sh")] if paths or files else []
    if paths or files:
        # one stat for both, of what each leads to; a path that is a symbolic link is one
        # (Linux gives every link mode 777), as stat -P would say
        out.append(f"stats -L '{STAT}' " + " ".join(quote_path(path) for path in [*paths, *files]))
    out += [
        f'real {quote_path(path)}; enc "$r"; p=$st_{i}; if [ -L {quote_path(path)} ]; then'
        f' p="777:symbolic link"; else case $p in -) ;; *) p=${{p%% *}}:${{p#* * * }} ;; esac;'
        f' fi; echo "path {b64(path)} $enc_v $p"'
        for i, path in enumerate(paths, 1)
    ]
    if files:
        out.append(script("file_state.sh"))
        out += [
            f'file_state {b64(path)} {quote_path(path)} {MAX_FILE} "$st_{i}"'
            for i, path in enumerate(files, len(paths) + 1)
        ]
    return out


def occupied_lines(paths: Sequence[str]) -> list[str]:
    """Return the probe lines that name, for each directory of ``paths`` with anything in
    it, one entry there (``occupied NAME ENTRY``; ENTRY ``?`` for a directory it cannot
    list), read by the shell's own globs: no program started. A tmpfs mounted over such a
    directory would hide what is in it (roles/scratch.py)."""
    if not paths:
        return []
    return [
        'occupied() { [ -d "$1" ] || return 0; if ! [ -r "$1" ] || ! [ -x "$1" ]; then'
        ' echo "occupied $2 ?"; return 0; fi; for x in "$1"/* "$1"/.[!.]* "$1"/..?*; do'
        ' if [ -e "$x" ] || [ -L "$x" ]; then enc "${x##*/}"; echo "occupied $2 $enc_v";'
        " return 0; fi; done; }",
        *(f"occupied {quote_path(path)} {b64(path)}" for path in paths),
    ]


def parse_occupied(output: list[str]) -> dict[str, str]:
    """Return, for each directory of ``occupied`` lines, the entry found in it ("?": one it
    cannot list); a directory that is empty or absent has none."""
    return {
        decode(name): "?" if entry == "?" else decode(entry)
        for name, entry in (line.split(" ")[1:3] for line in output)
    }


def parse_paths(output: list[str], mounts: Sequence[Mount]) -> dict[str, PathInfo]:
    """Return the probe's ``paths`` from its ``path`` lines: for each path a
    :class:`PathInfo` (the mount of ``mounts`` holding it)."""
    paths: dict[str, PathInfo] = {}
    for line in output:  # path NAME REAL MODE:KIND ("-" when absent); KIND may have spaces
        name, real, mode_kind = (line.partition(" ")[2].split(" ", 2) + ["", ""])[:3]
        mode, _, kind = mode_kind.partition(":")
        real = decode(real)
        paths[decode(name)] = PathInfo(
            kind=kind or None,
            mode=mode if kind else None,
            real=real,
            mount=mount_of(real, mounts),
        )
    return paths


def parse_files(output: list[str]) -> dict[str, FileInfo]:
    """Return the probe's ``files`` dict from its ``file`` lines."""
    return dict(parse_file(line.partition(" ")[2]) for line in output)


def parse_file(rest: str) -> tuple[str, FileInfo]:
    """Return the path and the :class:`FileInfo` of one ``file`` line of the probe."""
    name, state, link, target, *more = rest.split(" ")
    if link not in ("0", "1") or not state:
        raise ValueError(f"bad file line for {decode(name)!r}")
    mode, owner, size = (more[0], more[1], int(more[2])) if len(more) >= 3 else (None,) * 3
    content = (more[3] if len(more) > 3 else "") if state == "file" else None
    info = FileInfo(
        state=state,
        link=link == "1",
        target="" if target == "-" else decode(target),
        mode=mode,
        owner=owner,
        size=size,
        content=None if content is None else decode(content),
    )
    return decode(name), info


SECTION = Section(
    "files",
    fields=("paths", "files"),
    parse=lambda answer: {
        "paths": parse_paths(answer.lines("path"), answer.found["mounts"]),
        "files": parse_files(answer.lines("file")),
    },
    lines=lambda arguments: probe_lines(arguments["paths"], arguments["files"]),
    arguments=(
        Argument("paths", default=REQUIRED, sent=list),
        Argument("files", default=REQUIRED, sent=list),
    ),
)
OCCUPIED = Section(
    "occupied",
    fields=("occupied",),
    parse=lambda answer: {"occupied": parse_occupied(answer.lines("occupied"))},
    lines=lambda arguments: occupied_lines(arguments["occupied"] or []),
    arguments=(Argument("occupied", sent=list),),
)
