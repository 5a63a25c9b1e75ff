"""The operations that take away what podstate made on a pod (roles/removal.py decides).

Each removes one thing, in one step of the apply's folded command, and proves on the pod,
when it runs, that the thing is still what podstate made: a file still holds what podstate
wrote (its sha256), a user's file still holds what the probe read. What holds something else
by then is left as it is, and the step fails saying so; the next run reports it as left.
Each step leaves its item as before or as after, never between.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Generator, Iterable

from pyinfra import host
from pyinfra.api import operation

from podstate.facts.made import sums
from podstate.facts.record import word
from podstate.operations.venv import MANAGED
from podstate.run import findings
from podstate.run.bookkeeping import write_command
from podstate.run.lock import Change, changing
from podstate.shell import quote_path, script


def remove_command(path: str, sums: Iterable[str] = (), records: Iterable[str] = ()) -> str:
    """Return sh that removes the file ``path`` while it holds one of ``sums`` (sha256), or
    of those its lines in ``records`` (the records of what podstate made, on the pod: their
    sums never leave it) name; nothing there is done; anything else there fails, and is
    left as it is."""
    q, w = quote_path(path), shlex.quote(word(path))
    lines = " ".join(quote_path(r) for r in records)
    return (
        f"if [ -L {q} ] || [ -e {q} ]; then s=$(sha256sum <{q}) || exit 1; s=${{s%% *}}; o=;"
        f" case $s in {'|'.join(sums) or '-'}) o=1 ;; esac; for r in {lines or '-'}; do"
        ' [ -f "$r" ] || continue; while read -r k p m _; do'
        f' if [ "$p" = {w} ]; then case ,$m, in *,"$s",*) o=1 ;; esac; fi; done <"$r"; done;'
        f" if [ -n \"$o\" ]; then rm -f -- {q}; else echo 'podstate: '{shlex.quote(path)}': holds"
        " what podstate did not write; left as it is' >&2; exit 1; fi; fi"
    )


@operation()
def remove_file(
    path: str, content: str | None, records: Iterable[str]
) -> Generator[Change, None, None]:
    """
    Remove a file podstate created, while it still holds what podstate wrote.

    + path: the file (``~/`` for the SSH user's home)
    + content: what the probe read there, for the diff (None: not read, or a secret)
    + records: the records of what podstate made on the pod, whose lines for ``path`` name
      the sha256 of each content podstate wrote there

    **Example:**

    .. code:: python

        remove_file(name="Remove /etc/x", path="/etc/x", content="x\\n", records=[MADE])
    """
    findings.describe(f"would remove: {path}")
    if content is not None:
        findings.record_diff(path, content, "", gone=True)
    yield changing(remove_command(path, records=records))


@operation()
def put_back(
    path: str,
    current: str,
    content: str | None,
    what: str,
    mode: str | None = None,
    owner: str | None = None,
) -> Generator[Change, None, None]:
    """
    Put a user's file back as it was before podstate wrote it, or edited it: ``content``
    replaces ``current`` in one rename, only while the file still holds ``current``.

    + path: the user's file
    + current: what the probe read there
    + content: what it held before (None: there was no file, which the step removes)
    + what: what is put back, in words (the check's line)
    + mode, owner: the mode and ``UID:GID`` it had then, which it gets back in the same
      step (proved); None: it keeps the ones it has now
    """
    findings.describe(what)
    findings.record_diff(path, current, content or "", gone=content is None)
    if content is None:
        yield changing(remove_command(path, [sums(current)]))
    elif mode and owner:
        yield changing(write_command(path, content, False, mode, current, owner))
    else:
        yield changing(write_command(path, content, own=False, mode="600", was=current))


@operation()
def remove_paths(
    paths: list[str],
    directories: list[str],
    what: str,
    trees: Iterable[str] = (),
    globs: Iterable[str] = (),
) -> Generator[Change, None, None]:
    """
    Remove podstate's own files (never read: a secret, an archive of host keys), then its
    directories if nothing else is left in them.

    + paths: files to remove
    + directories: directories to remove once empty (one holding anything else stays)
    + what: what goes, in words (the check's line)
    + trees: podstate's own working directories, removed with all they hold
    + globs: files named by a pattern in a directory (its last part: ``venv-*.tar.*``)
    """
    findings.describe(what)
    files = " ".join(quote_path(p) for p in paths)
    steps = [f"rm -f -- {files}"] if paths else []
    steps += [f"rm -f -- {quote_path(posixpath.dirname(g))}/{posixpath.basename(g)}" for g in globs]
    steps += [f"rm -rf -- {quote_path(t)}" for t in trees]
    steps += [f"{{ rmdir -- {quote_path(d)} 2>/dev/null || :; }}" for d in directories]
    if not steps:
        host.noop("nothing to remove")
        return
    yield changing(" && ".join(steps))


# The archived host keys in the boot hook's data, the file that proves them last.
KEYS = ("hostkeys.sum", "hostkeys.tar")


def proved_command(kind: str, path: str, field: str, removal: str) -> str:
    """Return sh that runs ``removal`` only while what is at ``path``, an entry of ``kind``
    (with ``field``: ``scratch``, or "") in the records, holds what podstate wrote there
    (scripts/made_proof.sh, on the pod, right before it removes anything); else it fails
    saying so, and everything is left as it is."""
    q = quote_path(path)
    return script("made_proof.sh") + (  # a function the fold defines once (run.fold.SHARED)
        f"\nif made_proof {kind} {q} {shlex.quote(field)}; then {removal}; else echo 'podstate: '"
        f"{shlex.quote(path)}': holds what podstate did not write; left as it is' >&2; exit 1;"
        " fi"
    )


@operation()
def remove_own(kind: str, path: str, *, scratch: bool = False) -> Generator[Change, None, None]:
    """
    Remove podstate's own thing that an entry of the records names without a sha256 (the
    secrets file, the archived host keys, the boot hook's data, the venv's snapshots, a
    directory podstate made), while it holds what podstate wrote there
    (``proved_command``): its files, in order (the one that proves it last), then its
    directories if nothing else is left in them (``_own``).

    + kind: the entry's kind: secrets, keys, data, snapshot or dir
    + path: the entry's path
    + scratch: a dir entry's directory is a scratch directory, with podstate's caches for
      the venv in it (``.podstate-cache``), which go first
    """
    what, files, directories, trees = _own(kind, path, scratch=scratch)
    findings.describe(what)
    steps = [f"rm -rf -- {quote_path(t)}" for t in trees]
    steps += [f"rm -f -- {_file(p)}" for p in files]
    steps += [f"{{ rmdir -- {quote_path(d)} 2>/dev/null || :; }}" for d in directories]
    field = "scratch" if scratch else ""
    yield changing(proved_command(kind, path, field, " && ".join(steps)))


def _own(kind: str, path: str, *, scratch: bool) -> tuple[str, list[str], list[str], list[str]]:
    """Return what a removal of an entry of ``kind`` at ``path`` takes: in words; its files,
    in order (a last part with ``*`` or ``[``: a pattern of names podstate makes); the
    directories it removes once empty; and podstate's working trees it removes whole."""
    join, parent = posixpath.join, posixpath.dirname(path)
    if kind == "dir":
        trees = [join(path, ".podstate-cache")] if scratch else []
        return f"would remove: {path}, when nothing else is in it", [], [path], trees
    if kind == "secrets":
        return f"would remove: {path} (the secrets file)", [path], [parent], []
    if kind == "snapshot":
        hexes = "[0-9a-f]" * 12
        names = [f"venv-{hexes}.tar.{z}" for z in ("zst", "gz")] + ["current.bad", "current"]
        files = [join(path, n) for n in names]
        return f"would remove: the venv snapshots in {path}", files, [path], []
    if kind == "keys":
        files = [join(parent, n) for n in KEYS]
        return f"would remove: the archived host keys in {parent}", files, [], []
    files = [join(path, n) for n in ("status", *KEYS, "state")]
    return f"would remove: the boot hook's data in {path}", files, [path], []


def _file(path: str) -> str:
    """Return ``path`` as a word of sh: quoted, but for a last part that holds ``*`` or
    ``[`` (a pattern podstate wrote, of names podstate makes), which is left to match."""
    directory, name = posixpath.split(path)
    if "*" in name or "[" in name:
        return f"{quote_path(directory)}/{name}"
    return quote_path(path)


@operation()
def remove_package(package: str, what: str) -> Generator[Change, None, None]:
    """
    Remove a Debian package podstate installed (dpkg refuses, and the step fails, when
    another installed package depends on it: podstate removes nothing else).

    + package: its name
    + what: what goes, in words (the check's line)
    """
    findings.describe(what)
    yield changing(
        f"DEBIAN_FRONTEND=noninteractive dpkg --remove -- {shlex.quote(package)} >/dev/null"
    )


@operation()
def remove_checkout(path: str, *, keep_directory: bool, what: str) -> Generator[Change, None, None]:
    """
    Remove a checkout podstate cloned, while nothing of anyone's own is in it
    (scripts/repo_clean.sh, checked again when the step runs; else it fails naming what
    work is in it, and is left: ``checkout_command``).

    + path: the checkout
    + keep_directory: leave the (empty) directory it was cloned into
    + what: what goes, in words (the check's line)
    """
    findings.describe(what)
    yield changing(checkout_command(path, keep_directory=keep_directory))


def checkout_command(path: str, *, keep_directory: bool) -> str:
    """Return sh that removes the checkout at ``path`` (its contents alone, with
    ``keep_directory``) while scripts/repo_clean.sh finds nothing of anyone's own in it,
    looked at again when it runs (work may have been done since the plan); else it fails
    naming the kinds of work, and removes nothing."""
    q = quote_path(path)
    gone = f"find {q} -mindepth 1 -delete" if keep_directory else f"rm -rf -- {q}"
    return (
        script("repo_clean.sh")
        + f"if repo_clean {q}; then {gone}; else printf 'podstate: %s: it holds work of its"
        f' own now (%s): left as it is\\n\' {shlex.quote(path)} "$repo_work" >&2; exit 1; fi'
    )


def venv_command(path: str) -> str:
    """Return sh that removes the venv at ``path``: its link, the versioned directories
    beside it (``.<name>-<fingerprint12>``, their ``.part`` and ``-2``), and what the venv
    role keeps for it in podstate's working directory beside them (``.podstate``): its log
    and requirements (``<name>.log``, ``<name>.requirements``), and podstate's uv (``uv``,
    ``uv-env``, ``uv-install.log``) when no other venv link is in that directory; then that
    directory, if nothing else is in it (on a volume it holds the boot hook and the
    records); unless a process runs from it now, or may (scripts/busy.sh, as the probe
    looked before the plan: one may have started since), when it fails naming them and
    removes nothing."""
    directory, name = posixpath.split(path)
    d, q = quote_path(directory), quote_path(path)
    hexes = "[0-9a-f]" * 12
    versions = " ".join(
        f"{d}/{shlex.quote('.' + name + '-')}{hexes}{tail}"
        for tail in ("", ".part", "-2", "-2.part")
    )
    work = f"{d}/{MANAGED}"
    own = " ".join(f"{work}/{shlex.quote(name + tail)}" for tail in (".log", ".requirements"))
    uv = " ".join(f"{work}/{n}" for n in ("uv", "uv.podstate-new", "uv.podstate-upload"))
    busy = (
        "enc() { enc_v=$1; }\n"
        + script("busy.sh")
        + f"b=$(made_venv_busy - {q})\n"
        + 'if [ -n "$b" ]; then w=; while read -r _ _ p r; do c=${r% unread}; w="$w, $c (pid $p)";'
        + ' [ "$c" = "$r" ] || w="$w, which podstate cannot read"; done <<EOF\n$b\nEOF\n'
        + "printf 'podstate: %s: in use now by %s: left as it is; the next apply removes it once"
        + f' they stop\\n\' {q} "${{w#, }}" >&2; exit 1; fi\n'
    )
    return busy + (
        f'rm -f -- {q} && for v in {versions}; do [ ! -e "$v" ] || rm -rf -- "$v" || exit 1;'
        f' done && rm -f -- {own} && o=; for l in {d}/*; do [ -L "$l" ] && case $(readlink -- "$l")'
        f' in .*-{hexes} | .*-{hexes}-2) o=1 ;; esac; done; if [ -z "$o" ]; then rm -rf --'
        f" {work}/uv-env && rm -f -- {uv} {work}/uv-install.log || exit 1; fi;"
        f" {{ rmdir -- {work} 2>/dev/null || :; }}"
    )


@operation()
def remove_venv(path: str, what: str) -> Generator[Change, None, None]:
    """
    Remove the venv podstate built at ``path`` (``venv_command``).

    + path: the venv's path (a link to its versioned directory)
    + what: what goes, in words (the check's line)
    """
    findings.describe(what)
    yield changing(venv_command(path))


@operation()
def unmount(
    path: str, *, remove: bool, what: str, discard: bool = False
) -> Generator[Change, None, None]:
    """
    Unmount the tmpfs podstate mounted at ``path`` (``unmount_command``), then remove the
    mount point when podstate made it and it is empty.

    + path: the mount point
    + remove: podstate made the mount point
    + what: what goes, in words (the check's line)
    + discard: the files in it go with it (``podstate uninstall --discard-scratch``)
    """
    findings.describe(what)
    yield changing(unmount_command(path, remove=remove, discard=discard))


def unmount_command(path: str, *, remove: bool, discard: bool) -> str:
    """Return sh that unmounts the tmpfs at ``path`` (``umount`` refuses one in use, and
    fails), then removes the mount point with ``remove`` when it is empty; unless it holds a
    file now (podstate's caches, .podstate-cache, aside; a file written since the plan too)
    and not ``discard``: then it fails naming the first file found, and leaves it mounted."""
    q = quote_path(path)
    rest = f" && {{ rmdir -- {q} 2>/dev/null || :; }}" if remove else ""
    look = (
        ""
        if discard
        else f"h=$(find {q} -xdev -path {q}/.podstate-cache -prune -o ! -type d -print -quit"
        f" 2>/dev/null) && [ -r {q} ] || h='what podstate cannot read'; if [ -n \"$h\" ]; then"
        " printf 'podstate: %s: not empty now (%s): left mounted; empty it, and the next run"
        f" unmounts it (podstate uninstall --discard-scratch discards it)\\n' {shlex.quote(path)}"
        ' "$h" >&2; exit 1; fi; '
    )
    return f"{{ ! mountpoint -q -- {q} || {{ {look}umount -- {q}; }}; }}{rest}"
