"""pyinfra operations of the venv role: build, snapshot and restore a venv, provide uv.

roles/venv.py decides from the pod probe and describes the venv once (``Venv``); these
take it and run podstate's scripts (scripts/venv.sh, venv_snapshot.sh, uv_install.sh) with
its values as arguments. Every command that changes the pod runs under the run's pod lock
(``lock.changing``). What the venv leaves on the pod for the probe to read is defined
here: the record file in each venv (``VENV_RECORD``) and the snapshot directory's
``current`` file (``SNAPSHOT_CURRENT``, written by ``snapshot_line``, read by
``read_snapshot``).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.command import FileUploadCommand

from podstate import settings
from podstate.lock import changing
from podstate.shell import b64, quote_path, script

# The file in every podstate venv that records what it was built from (its fingerprint).
VENV_RECORD = ".podstate-venv"

# The file in a snapshot directory that names its complete snapshot: one line of
# SNAPSHOT_FIELDS separated by single spaces (the archive is a file name in that directory,
# the compressor ``zstd`` or ``gzip``). Written last, after the archive is in place.
SNAPSHOT_CURRENT = "current"
SNAPSHOT_FIELDS = ("fingerprint", "archive", "compressor")
_SUFFIX = {"zstd": "zst", "gzip": "gz"}

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


def snapshot_line(fingerprint: str, archive: str, compressor: str) -> str:
    """Return the ``current`` line that names ``archive`` as the snapshot of ``fingerprint``."""
    return " ".join((fingerprint, archive, compressor))


def read_snapshot(line: str) -> dict[str, str] | None:
    """Return a ``current`` line's fields by ``SNAPSHOT_FIELDS`` (None unless it has them all)."""
    values = line.removesuffix("\n").split(" ")
    if len(values) != len(SNAPSHOT_FIELDS) or not all(values):
        return None
    return dict(zip(SNAPSHOT_FIELDS, values, strict=True))


def version_name(path: str, fingerprint: str) -> str:
    """Return the name of the versioned directory beside ``path`` for ``fingerprint``."""
    return f".{posixpath.basename(path)}-{fingerprint[:12]}"


def is_version(path: str, name: str | None) -> bool:
    """True when ``name`` is a versioned directory name podstate makes for ``path``."""
    return bool(
        re.fullmatch(rf"\.{re.escape(posixpath.basename(path))}-[0-9a-f]{{12}}", name or "")
    )


@dataclass(frozen=True)
class Venv:
    """One venv as it is wanted on one pod: what every venv operation needs, computed once.

    ``record`` is the JSON kept in the venv (``VENV_RECORD``); ``python`` the pod's
    interpreter (it builds the venv, and supervises the scripts); ``requirements`` the
    installer's requirements file; ``distributions`` the names the venv must then hold;
    ``environment`` TMPDIR and the installer's caches, on local storage.
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

    @property
    def version(self) -> str:
        """The versioned directory's name, beside ``path``."""
        return version_name(self.path, self.fingerprint)

    @property
    def version_dir(self) -> str:
        """The versioned directory's path."""
        return posixpath.join(posixpath.dirname(self.path), self.version)


def _run(python: str, names: tuple[str, ...], *args: str) -> str:
    """Return sh that runs podstate's scripts ``names``, sent as one, with ``args``, under
    ``python`` so that the script dies with the connection (see ``_SUPERVISOR``)."""
    text = "".join(script(name) for name in names)
    name = posixpath.splitext(names[-1])[0]
    words = [python, "-c", _SUPERVISOR, text, name, *args]
    return " ".join(shlex.quote(word) for word in words)


def _installer_args(want: Venv) -> list[str]:
    """Return the scripts' trailing arguments: the installer's variables, ``--``, its index
    options."""
    return [f"{k}={v}" for k, v in want.environment.items()] + ["--", *want.index_args]


def venv_command(want: Venv, uv: str | None, restore: dict[str, Any] | None = None) -> str:
    """Return sh that builds ``want`` (or restores it from ``restore``) and switches to it.

    See ``venv`` for the arguments, and scripts/venv.sh.
    """
    if restore:
        how, source = restore["compressor"], restore["archive"]
        current = posixpath.join(posixpath.dirname(source), SNAPSHOT_CURRENT)
    else:
        how, source, current = want.installer, b64(want.requirements), ""
    return _run(
        want.python,
        ("venv_lib.sh", "venv.sh"),
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
        " ".join(want.distributions),
        *_installer_args(want),
    )


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
        snapshot_line(want.fingerprint, archive, compressor),
    )


@operation()
def venv(want: Venv, ready: bool, uv: str | None = None, restore: dict[str, Any] | None = None):
    """
    Build or restore a venv at its versioned path and switch ``want.path`` to it atomically.

    + want: the venv (``Venv``)
    + ready: the probe found ``want.path`` working with this fingerprint
    + uv: the uv binary on the pod (the installer when ``want.installer`` is uv; it also
      checks the venv), None if there is none
    + restore: the snapshot to unpack instead of installing, as the probe found it
      (``fingerprint``, ``archive``: its path, ``compressor``), None: install

    **Example:**

    .. code:: python

        venv(name="Venv /opt/venv: build", want=Venv(...), ready=False,
             uv="/opt/.podstate/uv", _timeout=1800)
    """
    if ready:
        host.noop(f"{want.path} is a working venv of fingerprint {want.fingerprint[:12]}")
        return
    yield changing(venv_command(want, uv, restore), ttl=settings.VENV_TIMEOUT)


@operation()
def venv_snapshot(want: Venv, directory: str, current: str | None, zstd: bool):
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
    yield changing(snapshot_command(want, directory, zstd), ttl=settings.VENV_TIMEOUT)


@operation()
def upload_file(src: str, dest: str, mode: str = "755", gzipped: bool = False):
    """
    Upload a local file to the pod, atomically (the role calls it when the probe found
    no ``dest``).

    The file goes over SFTP to a temporary name beside ``dest`` (unpacked there when it is
    a gzip copy) and is renamed over it.

    + src: the file on the control machine
    + dest: absolute path on the pod
    + mode: octal mode of the file
    + gzipped: ``src`` is gzip-compressed; ``dest`` gets it unpacked

    **Example:**

    .. code:: python

        upload_file(name="Upload uv", src=gzcache.gzipped(find_uv_bin()),
                    dest="/opt/.podstate/uv", gzipped=True)
    """
    temp = f"{dest}.podstate-upload"
    ready = quote_path(f"{dest}.podstate-new" if gzipped else temp)
    yield changing(f"mkdir -p -- {quote_path(posixpath.dirname(dest))}")
    yield FileUploadCommand(src, temp)
    unpack = f"gzip -dc <{quote_path(temp)} >{ready} && " if gzipped else ""
    yield changing(
        f"{{ {unpack}chmod {mode} -- {ready} && mv -f -- {ready} {quote_path(dest)}; }} "
        f"|| {{ rm -f -- {quote_path(temp)} {ready}; exit 1; }}; rm -f -- {quote_path(temp)}"
    )


@operation()
def pip_install_uv(want: Venv, dest: str):
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
    command = _run(
        want.python, ("venv_lib.sh", "uv_install.sh"), dest, want.python, *_installer_args(want)
    )
    yield changing(command, ttl=settings.VENV_TIMEOUT)
