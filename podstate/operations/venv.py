"""pyinfra operations of the venv role: build, snapshot and restore a venv, provide uv.

roles/venv.py decides from the pod probe and describes the venv once (``Venv``); these
take it and run podstate's scripts (scripts/venv.sh, venv_snapshot.sh, uv_install.sh) with
its values as arguments. Every command that changes the pod runs under the run's pod lock
(``lock.changing``). The record file in each venv and the snapshot directory's ``current``
file, which the probe reads, and the distribution names it looks for (``normalize``), are
defined in podstate.facts.venv; ``snapshot_line`` writes ``current``.
"""

from __future__ import annotations

import io
import posixpath
import re
import shlex
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from pyinfra import host
from pyinfra.api import FileUploadCommand, FunctionCommand, Host, State, operation

from podstate import settings
from podstate.facts.venv import SNAPSHOT_CURRENT, VENV_RECORD, Snapshot, normalize
from podstate.operations.upload import upload_commands
from podstate.pyinfra_api import execute
from podstate.run import lock
from podstate.run.lock import Change, changing
from podstate.shell import b64, quote_path, script

# The directory beside the venvs where podstate keeps its uv, the build logs, and the
# requirements a build installs, uploaded just before it (``Venv.requirements_file``).
MANAGED = ".podstate"

_SUFFIX = {"zstd": "zst", "gzip": "gz"}

# How scripts/venv.sh starts the stderr line that says a snapshot cannot be restored (its
# sum does not match, it does not unpack, or it holds no working venv): the venv
# operation then builds instead, in the same run.
BAD_SNAPSHOT = "podstate: venv snapshot "

# The suffix of the second versioned directory of a fingerprint: where a venv is rebuilt
# when the one at its first name is in use and broken (a requested distribution removed).
ALTERNATE = "-2"

# Runs a long script under the pod's interpreter in a process group of its own, and kills
# that group when this command's stdout goes away (pyinfra killed, connection dropped):
# sshd leaves the commands of a dead session running, and a build nobody waits for must
# not switch the venv later behind the next run's back. Its arguments are sh's.
_SUPERVISOR = """\
import os, select, signal, subprocess, sys
child = subprocess.Popen(["/bin/sh", "-c", *sys.argv[1:]], start_new_session=True)
watch = select.poll()
watch.register(1, 0)
while True:
    try:
        sys.exit(child.wait(timeout=0.5))
    except subprocess.TimeoutExpired:
        pass
    if watch.poll(0):
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        sys.exit(1)
"""


def snapshot_line(fingerprint: str, archive: str, compressor: str, sha256: str) -> str:
    """Return the ``current`` line that names ``archive`` (of that ``sha256``) as the
    snapshot of ``fingerprint``."""
    return " ".join((fingerprint, archive, compressor, sha256))


def version_name(path: str, fingerprint: str, alternate: bool = False) -> str:
    """Return the name of the versioned directory beside ``path`` for ``fingerprint``
    (its second name, for a rebuild beside a broken one, with ``alternate``)."""
    return f".{posixpath.basename(path)}-{fingerprint[:12]}" + (ALTERNATE if alternate else "")


def is_version(path: str, name: str | None) -> bool:
    """True when ``name`` is a versioned directory name podstate makes for ``path``."""
    base = re.escape(posixpath.basename(path))
    return bool(re.fullmatch(rf"\.{base}-[0-9a-f]{{12}}(?:{ALTERNATE})?", name or ""))


@dataclass(frozen=True)
class Venv:
    """One venv as it is wanted on one pod: what every venv operation needs, computed once.

    ``record`` is the JSON kept in the venv (``VENV_RECORD``); ``python`` the pod's
    interpreter (it builds the venv, and supervises the scripts); ``requirements`` the
    installer's requirements file; ``distributions`` the names the venv must then hold;
    ``environment`` TMPDIR and the installer's caches, on local storage. ``seed``: ``add``
    (pip is installed too), ``check`` (pip is requested), ``no`` (no pip); ``compile``:
    byte-compile at install; ``alternate``: build at the fingerprint's second name.
    """

    path: str
    fingerprint: str
    record: str
    python: str
    installer: str
    requirements: str
    distributions: list[str] = field(default_factory=list)
    index_args: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    seed: str = "add"
    compile: bool = True
    alternate: bool = False

    @property
    def version(self) -> str:
        """The versioned directory's name, beside ``path``."""
        return version_name(self.path, self.fingerprint, self.alternate)

    @property
    def version_dir(self) -> str:
        """The versioned directory's path."""
        return posixpath.join(posixpath.dirname(self.path), self.version)

    @property
    def requirements_file(self) -> str:
        """Where a build finds ``requirements`` on the pod: uploaded there just before it
        (``requirements_upload``), and moved into the build's work directory by it."""
        name = f"{posixpath.basename(self.path)}.requirements"
        return posixpath.join(posixpath.dirname(self.path), MANAGED, name)


@dataclass(frozen=True)
class Fallback:
    """How the venv operation builds instead of restoring when the snapshot is bad.

    ``uv`` is where uv will be (None: the installer is pip); ``upload`` the control
    machine's uv to put there first (its file, and whether that is gzipped), or
    ``pip_uv``: install it there with pip first (neither: the pod has it); ``snapshot``
    the directory to pack the built venv into afterwards, with zstd when ``zstd``.
    """

    uv: str | None = None
    upload: tuple[str, bool] | None = None
    pip_uv: bool = False
    snapshot: str | None = None
    zstd: bool = False


def _words(python: str, names: tuple[str, ...], *args: str) -> list[str]:
    """Return the words of the command that runs podstate's scripts ``names``, sent as
    one, with ``args``, under ``python`` so that the script dies with the connection (see
    ``_SUPERVISOR``)."""
    text = "".join(script(name) for name in names)
    return [python, "-c", _SUPERVISOR, text, posixpath.splitext(names[-1])[0], *args]


def _run(python: str, names: tuple[str, ...], *args: str) -> str:
    """Return ``_words`` as sh."""
    return " ".join(shlex.quote(word) for word in _words(python, names, *args))


def _installer_args(want: Venv) -> list[str]:
    """Return the scripts' trailing arguments: the installer's variables, ``--``, its index
    options."""
    return [f"{k}={v}" for k, v in want.environment.items()] + ["--", *want.index_args]


def venv_command(want: Venv, uv: str | None, restore: Snapshot | None = None) -> str:
    """Return sh that builds ``want`` (or restores it from ``restore``) and switches to it.

    See ``venv`` for the arguments, and scripts/venv.sh. A build installs what
    ``requirements_upload`` put on the pod: the requirements never travel in a command.
    """
    return " ".join(shlex.quote(word) for word in venv_words(want, uv, restore))


def venv_words(want: Venv, uv: str | None, restore: Snapshot | None = None) -> list[str]:
    """Return the words of ``venv_command``, unquoted (the boot hook puts some of its own
    in)."""
    if restore:
        how, source, sha = restore.compressor, restore.archive, restore.sha256
        current = posixpath.join(posixpath.dirname(source), SNAPSHOT_CURRENT)
    else:
        how, source, current, sha = want.installer, want.requirements_file, "", ""
    return _words(
        want.python,
        ("venv_lib.sh", "venv_missing.sh", "venv.sh"),
        want.path,
        want.version,
        want.fingerprint,
        VENV_RECORD,
        b64(want.record),
        want.python,
        uv or "",
        how,
        source,
        current,
        sha,
        " ".join(normalize(name) for name in want.distributions),
        want.seed,
        "1" if want.compile else "0",
        *_installer_args(want),
    )


def requirements_upload(want: Venv) -> list[Change | FileUploadCommand]:
    """Return the commands that put the installer's requirements file (``want.requirements``)
    at ``want.requirements_file`` for a build: made its directory, then uploaded as file
    content (on the command's stdin, or over SFTP when large; podstate.run.fold), so a lock file
    of any size never meets the limit on a command's length. A list, to yield in turn."""
    data = io.BytesIO(want.requirements.encode("utf-8", "surrogateescape"))
    directory = quote_path(posixpath.dirname(want.requirements_file))
    return [changing(f"mkdir -p -- {directory}"), FileUploadCommand(data, want.requirements_file)]


def snapshot_command(want: Venv, directory: str, zstd: bool) -> str:
    """Return sh that packs ``want`` as the snapshot in ``directory`` (see ``venv_snapshot``
    and scripts/venv_snapshot.sh); zstd when the pod has it, else gzip."""
    compressor = "zstd" if zstd else "gzip"
    archive = f"venv-{want.fingerprint[:12]}.tar.{_SUFFIX[compressor]}"
    return _run(
        want.python,
        ("venv_snapshot.sh",),
        want.version_dir,
        VENV_RECORD,
        directory,
        archive,
        compressor,
        SNAPSHOT_CURRENT,
        # All but the sha256, which the script appends.
        snapshot_line(want.fingerprint, archive, compressor, "").removesuffix(" "),
    )


def _restore(
    state: State,
    host: Host,
    command: lock.Change,
    arguments: dict[str, Any],
    outcome: dict[str, str],
    can_build: bool,
) -> bool:
    """Run the restore ``command``; return whether the operation may go on.

    True when it restored, or when the snapshot was bad and the operation can build
    instead (``can_build``): then ``outcome["bad"]`` is the script's line saying why, which
    is logged for the pod. Any other failure prints the command's output, as pyinfra does
    for a failed command, and returns False.
    """
    status, output = execute.run_shell(
        state, host, lock.command_for(host, command.inner, command.ttl), arguments, output=True
    )
    lock.ran(host, status)
    if status:
        return True
    bad = [line for _, line in output if line.startswith(BAD_SNAPSHOT)]
    if bad and can_build:
        outcome["bad"] = bad[-1]
        execute.log(host, f"{bad[-1]}; building instead, and packing the snapshot again", "yellow")
        return True
    execute.print_failed_output(host, output)
    return False


@operation()
def venv(
    want: Venv,
    ready: bool,
    uv: str | None = None,
    restore: Snapshot | None = None,
    fallback: Fallback | None = None,
) -> Generator[Change | FileUploadCommand | FunctionCommand, None, None]:
    """
    Build or restore a venv at its versioned path and switch ``want.path`` to it atomically.

    A snapshot is verified as it is unpacked (its sha256, that it unpacks, that it holds a
    working venv of this fingerprint). A bad one is set aside and reported, and with
    ``fallback`` the venv is built instead in the same operation, then packed again.

    + want: the venv (``Venv``)
    + ready: the probe found ``want.path`` working with this fingerprint
    + uv: the uv binary on the pod (the installer when ``want.installer`` is uv; it also
      checks the venv), None if there is none
    + restore: the snapshot to unpack instead of installing, as the probe found it
      (``fingerprint``, ``archive``: its path, ``compressor``, ``sha256``), None: install
    + fallback: how to build when the snapshot is bad (``Fallback``); None: fail

    **Example:**

    .. code:: python

        venv(name="Venv /opt/venv: build", want=Venv(...), ready=False,
             uv="/opt/.podstate/uv", _timeout=1800)
    """
    if ready:
        host.noop(f"{want.path} is a working venv of fingerprint {want.fingerprint[:12]}")
        return
    if not restore:
        yield from requirements_upload(want)
        yield changing(venv_command(want, uv), ttl=settings.VENV_TIMEOUT)
        return
    # The generator runs again when the operation executes, and goes on after each command
    # has run: what follows the restore depends on how it went.
    outcome: dict[str, str] = {}
    arguments = execute.connector_arguments(host)
    command = changing(venv_command(want, uv, restore), ttl=settings.VENV_TIMEOUT)
    yield FunctionCommand(_restore, (command, arguments, outcome, fallback is not None), {})
    if "bad" not in outcome or fallback is None:
        return
    installer = uv
    if fallback.uv:
        installer = fallback.uv
        if fallback.upload:
            yield from upload_commands(fallback.upload[0], fallback.uv, "755", fallback.upload[1])
        elif fallback.pip_uv:
            yield changing(uv_install_command(want, fallback.uv), ttl=settings.VENV_TIMEOUT)
    yield from requirements_upload(want)
    yield changing(venv_command(want, installer), ttl=settings.VENV_TIMEOUT)
    if fallback.snapshot:
        yield changing(
            snapshot_command(want, fallback.snapshot, fallback.zstd), ttl=settings.VENV_TIMEOUT
        )


@operation()
def venv_snapshot(
    want: Venv, directory: str, current: str | None, zstd: bool
) -> Generator[Change, None, None]:
    """
    Pack a built venv as one archive in ``directory``, for restores after a pod restart.

    One large sequential file is what network volumes do well. It is written under a
    temporary name and renamed, then ``current`` (``SNAPSHOT_CURRENT``) is replaced the
    same way; older archives are removed.

    + want: the venv (``Venv``), built
    + directory: where snapshots live (usually on the network volume)
    + current: the fingerprint of the snapshot the probe found there (None: none)
    + zstd: the pod has zstd (else the archive is gzip, by pigz where the pod has it)

    **Example:**

    .. code:: python

        venv_snapshot(name="Venv snapshot", want=Venv(...),
                      directory="/workspace/.podstate/venv", current=None, zstd=True)
    """
    if current == want.fingerprint:
        host.noop(f"{directory} holds a snapshot of fingerprint {want.fingerprint[:12]}")
        return
    if want.alternate:  # its scripts name the second path, which a restore does not make
        host.noop(f"{want.path} is at {want.version}: packed after its next build")
        return
    yield changing(snapshot_command(want, directory, zstd), ttl=settings.VENV_TIMEOUT)


@operation()
def pip_install_uv(want: Venv, dest: str) -> Generator[Change, None, None]:
    """
    Install uv with pip into a venv on local disk, and link its binary at ``dest``.

    For pods whose architecture differs from the control machine's, whose uv cannot be
    uploaded. pip runs with the venv's index options and environment.

    + want: the venv (``Venv``) that needs uv
    + dest: where the uv binary must be (a symlink into the venv beside it)

    **Example:**

    .. code:: python

        pip_install_uv(name="Install uv", want=Venv(...), dest="/opt/.podstate/uv")
    """
    yield changing(uv_install_command(want, dest), ttl=settings.VENV_TIMEOUT)


def uv_install_command(want: Venv, dest: str) -> str:
    """Return sh that installs uv with pip beside ``dest`` (see ``pip_install_uv`` and
    scripts/uv_install.sh)."""
    return _run(
        want.python, ("venv_lib.sh", "uv_install.sh"), dest, want.python, *_installer_args(want)
    )
