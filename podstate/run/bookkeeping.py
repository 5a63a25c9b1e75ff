"""pyinfra operations podstate needs that pyinfra lacks.

Each takes what the pod probe found as an argument instead of reading facts itself, so a
converged pod costs no remote command beyond the probe, and a change costs exactly one.
"""

from __future__ import annotations

import shlex
from collections.abc import Generator, Iterable, Sequence

from pyinfra import host, logger, state
from pyinfra.api import FunctionCommand, Host, State, operation

from podstate.facts.files import FileInfo, PathInfo
from podstate.facts.probe import Probe
from podstate.limits import MAX_FILE
from podstate.pyinfra_api import execute
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import findings, fold, lock
from podstate.run.lock import Change, changing
from podstate.run.words import composed_word, content_word, sha256
from podstate.shell import quote_path, script
from podstate.sizes import format_size
from podstate.terminal import visible

PAGE = 4096


WRITE_FILE = script("write_file.sh")


def write_command(
    path: str,
    content: str,
    own: bool,
    mode: str,
    was: str | None = None,
    owner: str | None = None,
    last: bool = False,
    copied: Sequence[tuple[str, str]] = (),
) -> str:
    """Return a sh command that replaces ``path`` with ``content`` in one rename, and proves it.

    Its exit status is 0 only if every step succeeded and the path then reads back with the
    content (and, for a file podstate owns, the mode); see scripts/write_file.sh. The
    content travels as one word (``content_word``), never read by a shell as code. It runs
    in a subshell of the shell that runs it, which starts no shell of its own.

    A file the user owns (not ``own``) is an edit of ``was``, the content the probe read
    (None: no file was there), and is refused, left as it is, if the file no longer holds
    it when the command runs: another program wrote it since, and replacing it would lose
    that (RunPod's start script appends its ~/.bashrc line after sshd answers). With
    ``owner`` (``UID:GID``), the user's file gets ``mode`` and ``owner`` instead of keeping
    the old file's, proved after the write: a file podstate wrote over, put back as it was.
    A file podstate owns written ``last`` is put in place, in a fold, only once it and every
    write before it are proved: the ready marker. With ``copied`` (path and content of files
    on the pod), ``content`` ends with their contents, in order, then one line: that part
    is copied from them there (``composed_word``), not sent again.
    """
    arguments = [
        quote_path(path),
        ("last" if last else "own") if own else "edit",
        mode,
        sha256(content),
        composed_word(content, copied) or content_word(content),
    ]
    if not own:
        arguments.append("absent" if was is None else sha256(was))
        if owner:
            arguments.append(shlex.quote(owner))
    return f"(set -- {' '.join(arguments)}\n{WRITE_FILE})"


def file_problem(path: str, found: FileInfo, own: bool) -> str | None:
    """Return why podstate cannot write ``path`` as the probe found it, or None if it can.

    A file podstate owns must be a regular file or absent; a file the user owns may also be
    a symbolic link to a regular file (podstate then edits the target and keeps the link).
    """
    if found.state == "absent" or (found.state == "file" and not (own and found.link)):
        return None
    what = found.describe()
    if found.state == "large":
        return (
            f"{path} is {what}: podstate edits files of up to {format_size(MAX_FILE)}, "
            "since it rewrites them inside one SSH command; move the bulk of it into a file "
            f"that {path} sources"
        )
    if found.state == "unreadable":
        return f"{path} is {what}: podstate will not rewrite what it cannot read; check it"
    if own:
        return (
            f"{path} is {what}, not the regular file podstate writes there: "
            "move it away and run apply again"
        )
    if found.state in ("dangling", "loop"):
        return f"{path} is {what}: is the volume it points to mounted? Fix or remove the link"
    return f"{path} is {what}, which podstate cannot edit: make it a regular file or a link to one"


@operation()
def managed_file(
    path: str,
    content: str,
    found: FileInfo,
    own: bool,
    mode: str = "644",
    copied: Sequence[tuple[str, str]] = (),
) -> Generator[Change, None, None]:
    """
    Make a file hold ``content``: replace it atomically and verify it on the pod.

    + path: absolute path on the pod (``~/`` for the SSH user's home)
    + content: the whole desired content
    + found: what the pod probe found at ``path``
    + own: podstate owns the file (a regular file of ``mode``); else the user does, and
      podstate follows a symbolic link to its target and keeps an existing file's mode and
      owner
    + mode: octal mode of the file podstate owns, or of a new file
    + copied: files on the pod (path, content) the write copies ``content``'s end from

    Anything else at the path (a directory, a dangling link, a file too large to read) is a
    violation: nothing is written. A file the user owns that another program wrote after the
    probe read it is left as it is, and the write fails saying so (``write_command``).

    **Example:**

    .. code:: python

        managed_file(name="Profile", path=PROFILE, content=text,
                     found=probe.files[PROFILE], own=True)
    """
    problem = file_problem(path, found, own)
    if problem:
        findings.violation(problem, f"files.{path}")
        return
    if found.content == content and (not own or found.mode == mode):
        host.noop(f"{path} is up to date")
        return
    if found.content != content:
        findings.record_diff(path, found.content, content)
    command = write_command(path, content, own, mode, found.content, copied=copied)
    yield changing(command, later=True)


def owned_file(
    name: str,
    path: str,
    content: str,
    probe: Probe,
    mode: str = "644",
    copied: Sequence[tuple[str, str]] = (),
) -> None:
    """Add the operation ``name`` that makes ``path``, a file podstate owns, hold ``content``
    with ``mode`` (``managed_file``, compared with what the probe found there; ``copied``:
    see ``write_command``). Returns nothing: the operation is in the deploy."""
    found = probe.files[path]
    managed_file(
        name=name, path=path, content=content, found=found, own=True, mode=mode, copied=copied
    )


@operation()
def directories(
    paths: dict[str, str | None], found: dict[str, PathInfo], hidden: Iterable[str] = ()
) -> Generator[Change, None, None]:
    """
    Create directories and set their modes, in one command.

    + paths: path -> octal mode (None: leave the mode alone)
    + found: what the pod probe found at each path (its ``paths``: kind and mode)
    + hidden: mount points that get a new, empty filesystem in this run, hiding what is below

    **Example:**

    .. code:: python

        directories(name="Scratch", paths={"/scratch": "1777"}, found=probe.paths)
    """

    def gone(path: str) -> bool:
        return any(path == m or path.startswith(m.rstrip("/") + "/") for m in hidden)

    create = [p for p in paths if found[p].kind is None or gone(p)]
    fix = [p for p in paths if p not in create and paths[p] and found[p].mode != paths[p]]
    if not create and not fix:
        host.noop("directories exist with the right modes")
        return
    commands = []
    if create:
        commands.append("mkdir -p -- " + " ".join(shlex.quote(p) for p in create))
    for path in create + fix:
        if paths[path]:
            commands.append(f"chmod {paths[path]} -- {shlex.quote(path)}")
    yield changing(" && ".join(commands))


@operation()
def mark_ready(
    marker: tuple[str, str], record: tuple[str, str] | None
) -> Generator[Change, None, None]:
    """
    Write the pod's ready marker on the container disk, and the record of this apply on the
    volume, each atomically and verified.

    + marker: (path, content) of the marker
    + record: (path, content) of the record, None where the pod has no volume

    **Example:**

    .. code:: python

        mark_ready(name="Ready marker", marker=(MARKER, text), record=(RECORD, text))
    """
    commands = [write_command(*marker, own=True, mode="644", last=True)]
    if record:
        commands.append(write_command(*record, own=True, mode="600"))
    yield changing(" && ".join(commands), later=True)  # the marker: once all is proved


def tmpfs_options(size: int, mode: str | None = None) -> str:
    """Return tmpfs options for ``size`` bytes, rounded up to whole pages like the kernel."""
    pages = -(-size // PAGE)
    options = f"size={pages * PAGE // 1024}k"
    return f"{options},mode={mode}" if mode else options


def mount_command(path: str, size: int, mode: str) -> str:
    """Return the command that mounts a tmpfs of ``size`` at ``path`` (made if missing),
    unless another run mounted one there since this one looked; never over a directory that
    something was put in since the probe looked, which the tmpfs would hide (roles/scratch.py
    refuses those it saw): that fails, saying so."""
    q = shlex.quote(path)
    return (
        f"mkdir -p -- {q} && {{ mountpoint -q -- {q} || "
        f'if [ -n "$(ls -A -- {q} 2>&1)" ]; then echo "{q} is not empty: no tmpfs over it" >&2; '
        f"false; else mount -t tmpfs -o {tmpfs_options(size, mode)} podstate {q}; fi; }}"
    )


@operation()
def tmpfs(
    path: str, size: int, mode: str, mounted_size: int | None, mounted_mode: str | None = None
) -> Generator[Change, None, None]:
    """
    Mount a tmpfs of ``size`` at ``path``, or resize the one already there and set its mode.

    + path: mount point (created if missing)
    + size: bytes
    + mode: octal mode of the mount's root
    + mounted_size: size of the tmpfs already mounted there, None if there is none
    + mounted_mode: mode of the root of the tmpfs already there (None: leave it as it is)
    """
    wanted = -(-size // PAGE) * PAGE
    q = shlex.quote(path)
    change = [f"mount -o remount,{tmpfs_options(size)} {q}"] if mounted_size != wanted else []
    change += [f"chmod {mode} -- {q}"] if mounted_mode not in (None, mode) else []
    if mounted_size is None:  # unless another run mounted it since this one looked
        yield changing(mount_command(path, size, mode))
    elif change:
        yield changing(" && ".join(change))
    else:
        host.noop(f"{path} is a tmpfs of {format_size(size)}")


@operation(is_idempotent=False)
def lock_other_files() -> Generator[None, None, None]:
    """
    Put the pod lock around the changes of every other deploy file's operations.

    podstate's own operations take the lock with each change (``changing``). Those of a
    team's own deploy files cannot, so once every file is planned (the run executes), each
    of their operations on this pod is made to take the lock before its first command: no
    command is spent when nothing changes, and none of their facts is read twice.
    """
    if not state.is_executing:
        host.noop("decided when the run executes")
        return
    found = findings.of(host)
    others = [
        op_hash
        for op_hash in pyinfra_plan.host_ops_after(state, host, pyinfra_plan.current_op(host))
        if op_hash not in found.ops and op_hash not in found.bookkeeping
    ]
    for op_hash in others:
        pyinfra_plan.before_first_command(state, host, op_hash, _lock_for_others)
    host.noop(f"{len(others)} operation(s) of other deploy files take the pod lock to change")
    return
    yield  # a generator, as every operation


@operation(is_idempotent=False)
def fold_changes() -> Generator[None, None, None]:
    """
    Run podstate's own changes to this pod as one command, under the pod lock (see
    ``podstate.run.fold``): one for each run of podstate's operations that no other deploy
    file's operation comes between (the ready marker comes after them all). The last
    releases the lock when no other deploy file's operation comes after it.
    """
    if not state.is_executing:
        host.noop("decided when the run executes")
        return
    found = findings.of(host)
    groups: list[list[str]] = [[]]
    for op_hash in pyinfra_plan.host_ops_after(state, host, pyinfra_plan.current_op(host)):
        if op_hash in found.ops:
            groups[-1].append(op_hash)
        elif op_hash not in found.bookkeeping and groups[-1]:
            groups.append([])  # whether that operation will change the pod is known only
            # once it runs, so the lock is kept for it
    groups = [group for group in groups if group]
    segments = sum(
        fold.plan(state, host, group, release=group is groups[-1] and not _others_after(group))
        for group in groups
    )
    host.noop(f"podstate's changes run as {segments} command(s)")
    return
    yield  # a generator, as every operation


def _others_after(group: list[str]) -> bool:
    """Return whether another deploy file's operation runs after the operations ``group``."""
    found = findings.of(host)
    return any(
        op_hash not in found.ops and op_hash not in found.bookkeeping
        for op_hash in pyinfra_plan.host_ops_after(state, host, group[-1])
    )


def _lock_for_others() -> str:
    """Return the command that takes (or holds) the pod lock for another file's change."""
    return lock.command_for(host, ":")


@operation()
def release_lock() -> Generator[str, None, None]:
    """
    Release the pod lock this run holds, if any command of it changed the pod.
    """
    if not (lock.holds(host) if state.is_executing else findings.of(host).locked):
        host.noop("no lock held")
        return
    lock.ran(host, False)
    yield lock.release_command()


@operation(is_idempotent=False)
def violations() -> Generator[FunctionCommand, None, None]:
    """
    Fail this pod with what apply cannot fix, after everything fixable has converged.

    The roles record each violation (what is wrong, why it matters, how to fix it) with
    ``findings.violation`` while the deploy is planned; this operation comes last. The
    desired state's waivers hold some back (``findings.waived``, as in the check): a waived
    violation and a stale waiver are named, and fail nothing.
    """
    sorted_ = findings.waived(host)
    if state.is_executing:
        notes = [
            f"waived {v.finding} until {w.until} ({w.reason}): {v.message}"
            for v, w in sorted_.waived
        ] + sorted_.stale
        for note in notes:
            logger.warning(f"{execute.labelled(host, 'note', 'yellow')}: {visible(note)}")
    messages = [f"{v.finding}: {v.message}" for v in sorted_.failing]
    if not messages:
        host.noop("no violations")
        return

    def fail(state: State, host: Host) -> bool:
        for message in messages:
            logger.error(f"{execute.labelled(host, 'violation', 'red', True)}: {visible(message)}")
        return False

    yield FunctionCommand(fail, (), {})
