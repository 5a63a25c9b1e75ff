"""pyinfra operations podstate needs that pyinfra lacks.

Each takes what the pod probe found as an argument instead of reading facts itself, so a
converged pod costs no remote command beyond the probe, and a change costs exactly one.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, operation
from pyinfra.api.util import format_text

from podstate import findings, lock
from podstate.shell import b64, quote_path
from podstate.sizes import format_size

PAGE = 4096


def atomic_write_command(path: str, content: str, mode: str) -> str:
    """Return a sh command that replaces ``path`` with ``content`` in one rename.

    The new content goes to a temporary file in the same directory and is renamed over
    the old one, so a reader (or a run killed half-way) sees the old or the new file,
    never a partial one. The content travels base64-encoded, so no byte of it is ever
    seen by a shell.
    """
    directory, base = posixpath.split(path)
    return (
        f"set -e; mkdir -p {quote_path(directory or '/')}; "
        f"t=$(mktemp {quote_path(posixpath.join(directory, '.' + base + '.podstate.XXXXXX'))}); "
        "trap 'rm -f \"$t\"' EXIT; "
        f'printf %s {b64(content)} | base64 -d > "$t"; chmod {mode} "$t"; '
        f'mv -f "$t" {quote_path(path)}; trap - EXIT'
    )


@operation()
def managed_file(path: str, content: str, current: str | None, mode: str = "644"):
    """
    Replace a file atomically when its content differs from the desired one.

    + path: absolute path on the pod
    + content: the whole desired content
    + current: the content the probe read (None: the file is absent)
    + mode: octal mode of the file

    **Example:**

    .. code:: python

        managed_file(name="Profile", path="/etc/profile.d/podstate.sh",
                     content=text, current=probe["files"].get("/etc/profile.d/podstate.sh"))
    """
    if current == content:
        host.noop(f"{path} is up to date")
        return
    findings.record_diff(path, current, content)
    yield changing(atomic_write_command(path, content, mode))


@operation()
def directories(paths: dict[str, str | None], missing: Iterable[str], wrong_mode: Iterable[str]):
    """
    Create directories and set their modes, in one command.

    + paths: path -> octal mode (None: leave the mode alone)
    + missing: paths that do not exist yet
    + wrong_mode: existing paths whose mode differs from the one asked for
    """
    create = [p for p in paths if p in set(missing)]
    fix = [p for p in paths if p in set(wrong_mode) and paths[p]]
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


def tmpfs_options(size: int, mode: str | None = None) -> str:
    """Return tmpfs options for ``size`` bytes, rounded up to whole pages like the kernel."""
    pages = -(-size // PAGE)
    options = f"size={pages * PAGE // 1024}k"
    return f"{options},mode={mode}" if mode else options


@operation()
def tmpfs(path: str, size: int, mode: str, mounted_size: int | None):
    """
    Mount a tmpfs of ``size`` at ``path``, or resize the one already there.

    + path: mount point (created if missing)
    + size: bytes
    + mode: octal mode of the mount's root
    + mounted_size: size of the tmpfs already mounted there, None if there is none
    """
    wanted = -(-size // PAGE) * PAGE
    q = shlex.quote(path)
    if mounted_size == wanted:
        host.noop(f"{path} is a tmpfs of {format_size(size)}")
    elif mounted_size is None:  # unless another run mounted it since this one looked
        yield changing(
            f"mkdir -p -- {q} && {{ mountpoint -q -- {q} || "
            f"mount -t tmpfs -o {tmpfs_options(size, mode)} podstate {q}; }}"
        )
    else:
        yield changing(f"mount -o remount,{tmpfs_options(size)} {q}")


def changing(command: str, ttl: int | None = None) -> str:
    """Return ``command`` under the run's pod lock, and remember to release it at the end."""
    findings.of(host).locked = True
    return lock.guarded(command, ttl)


@operation()
def release_lock():
    """
    Release the pod lock this run took, if any command of it changed the pod.
    """
    if not findings.of(host).locked:
        host.noop("no change, no lock taken")
        return
    yield lock.release_command()


@operation(is_idempotent=False)
def violations():
    """
    Fail this pod with what apply cannot fix, after everything fixable has converged.

    The roles record each violation (what is wrong, why it matters, how to fix it) with
    ``findings.violation`` while the deploy is planned; this operation comes last.
    """
    messages = [message for _, message in findings.of(host).violations]
    if not messages:
        host.noop("no violations")
        return

    def fail(state, host) -> bool:
        for message in messages:
            logger.error(
                f"{host.print_prefix}{format_text('violation', 'red', bold=True)}: {message}"
            )
        return False

    yield FunctionCommand(fail, (), {})
