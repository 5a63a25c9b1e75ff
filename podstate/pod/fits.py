"""Every command podstate sends a pod fits in one argument: checked before any pod is touched.

sshd starts each command as one argument of the login shell (``sh -c COMMAND``, as pyinfra
sends it), and Linux starts no program with an argument of ``ARG_MAX`` bytes or more
(MAX_ARG_STRLEN): a command too long fails, in the middle of a run, with an exec error.
So the commands whose length grows with the desired state are built here from it while it
is validated, with what only the pod can tell (its interpreter's path, ...) at its
longest, and a state that would make one too long is refused with one line. What can be
large travels as file content or on a command's stdin instead, never on a command line: a
venv's requirements, secrets, the probe's program (podstate.facts.probe), the steps of an
apply (podstate.run.fold).
"""

from __future__ import annotations

import json
import posixpath
import shlex
from importlib.resources import files
from typing import Any

from podstate.desired.errors import SpecError
from podstate.desired.state import State, Venv
from podstate.desired.typed import build
from podstate.limits import ARG_MAX, MAX_FILE

PATH_MAX = 4096  # the longest path a pod answers with (its interpreter's, its uv's)


def login_length(command: str) -> int:
    """Return the bytes of the argument sshd hands the login shell for ``command``, as
    pyinfra sends it (``sh -c`` and the command quoted), without the terminating NUL."""
    return len(("sh -c " + shlex.quote(command)).encode("utf-8", "surrogateescape"))


def change_length(inner: str) -> int:
    """Return ``login_length`` of the change ``inner`` run on its own command line, under the
    pod lock, as a callback runs it (``lock.command_for``: a venv's restore), the longest it
    gets; podstate.run.fold sends it on a command's stdin, where any size fits."""
    from podstate.run import lock

    return login_length(lock.guarded(inner))


def check(state: dict[str, Any]) -> None:
    """Raise SpecError, starting with the key, when a command ``state`` (a normalized
    desired state) makes would not fit in one argument: installing the apt packages, each
    managed file of the state (``files``, the profile and what it declares, the
    ``authorized_keys`` block), and the venv's build and restore."""
    from podstate import settings
    from podstate.operations import apt as apt_ops
    from podstate.run import bookkeeping

    wanted = build(state)
    apt = list(wanted.packages.apt) if wanted.packages else []
    if apt:
        command = apt_ops.install_command(apt, True, settings.APT_LOCK_WAIT)
        _fit("packages.apt", "installing them", change_length(command), "list fewer packages")
    for path, item in (wanted.files or {}).items():
        command = bookkeeping.write_command(path, item.content, True, item.mode)
        _fit(f"files: {path}", "writing it", change_length(command), "use a shorter path")
    for key, path, content, fix in _generated(wanted):
        size = len(content.encode("utf-8", "surrogateescape"))
        if size > MAX_FILE:
            raise SpecError(
                f"{key}: {path} would hold {size} bytes, more than the {MAX_FILE} podstate "
                f"writes in one command; {fix}"
            )
    if wanted.venv:
        for name, command in _venv_commands(wanted, wanted.venv):
            _fit("venv", name, change_length(command), "list fewer distributions or options")
    if wanted.boot and wanted.boot.hook:
        size = _boot_data_size(wanted, wanted.boot.volume)
        if size > MAX_FILE:
            raise SpecError(
                f"boot.hook: the hook's data would hold about {size} bytes, more than the "
                f"{MAX_FILE} podstate writes in one command; keep large values and files on "
                "the volume"
            )


def _fit(key: str, what: str, length: int, fix: str) -> None:
    """Raise SpecError unless a command of ``length`` bytes fits in one argument."""
    if length >= ARG_MAX:
        raise SpecError(
            f"{key}: {what} takes a command of {length} bytes, more than the {ARG_MAX} Linux "
            f"passes as one: {fix}"
        )


def _generated(wanted: State) -> list[tuple[str, str, str, str]]:
    """Return (key, path, content, what to do when it is too large) of the managed files
    podstate writes from ``state`` alone, as roles/env.py and roles/authorized_keys.py
    render them (the NCCL guards set; the block of keys without the file's other lines)."""
    from podstate import nccl
    from podstate.paths import DECLARED, PROFILE, SECRETS_FILE
    from podstate.roles import authorized_keys, env

    variables = {**(wanted.dirs or {}), **(wanted.env or {})}
    variables.update({name: "1" for name in nccl.NAMES})
    prepend = list(wanted.path or ())
    sources = [SECRETS_FILE] if wanted.secrets is not None else []
    declared = {"variables": variables, "path": prepend, "sources": sources}
    fix = "keep a large value in a file (files) and point the variable at it"
    files = [
        ("env", PROFILE, env.render_profile(variables, prepend, sources), fix),
        ("env", DECLARED, json.dumps(declared, indent=1) + "\n", fix),
    ]
    if wanted.authorized_keys:
        block = authorized_keys.render(None, wanted.authorized_keys)
        files.append(("authorized_keys", authorized_keys.FILE, block, "list fewer keys"))
    return files


def _boot_data_size(wanted: State, volume: str) -> int:
    """Return about how many bytes the boot hook's data file (roles/boot.py) holds: each
    file it puts back on the container disk (as it is where it is whole lines, else
    base64-encoded), a line before each, and the
    venv's restore under the pod lock, for an interpreter at a usual path (one at a longer
    path is refused by the role when it plans)."""
    from podstate.facts.venv import Python
    from podstate.operations import boot as boot_ops
    from podstate.roles import boot, env, ready
    from podstate.roles import venv as role

    volume = volume.rstrip("/") + "/"
    startup = files("podstate.scripts").joinpath("ipython-startup.py").read_text()
    parts = [content for _, _, content, _ in _generated(wanted)[:2]] + [startup, ready.READY_SH]
    parts += [env.HOOK] * 2  # ~/.bashrc, and the login shell's own file
    lines = 300 * len(parts)  # each part's line before it: its kind, mode and path
    for path, item in (wanted.files or {}).items():
        if not path.startswith(volume):
            parts.append(item.content)
            lines += len(path.encode("utf-8", "surrogateescape")) + 16  # "file MODE PATH"
    spec = wanted.venv
    if spec and spec.snapshot:
        python = Python("/usr/local/bin/python3." + "9" * 8, "3.x" * 40, ensurepip=True)
        place = {name: "/" + "x" * 64 for name in ("TMPDIR", "PIP_CACHE_DIR", "UV_CACHE_DIR")}
        want = role.describe(spec, python, {**place, "UV_LINK_MODE": "copy"})
        parts.append(boot.restore_command(want, spec.snapshot))
        lines += 300
    sizes = [(len(p.encode("utf-8", "surrogateescape")), boot_ops.is_text(p)) for p in parts]
    data = sum(size if text else size * 4 // 3 for size, text in sizes)
    return data + 4 * len(parts) + lines + 4096


def _venv_commands(wanted: State, spec: Venv) -> list[tuple[str, str]]:
    """Return the venv's build and restore commands (what is named, and the command), with
    every value only the pod knows (its interpreter, uv, the installer's directories) as
    long as a path can be, or as the desired state's longest candidate for it."""
    from podstate.facts.venv import Python, Snapshot
    from podstate.operations import venv as venv_ops
    from podstate.roles import venv as role

    longest = "/" + "x" * (PATH_MAX - 1)
    candidates = [longest, *wanted.dir_paths]
    candidates += [posixpath.join(s, ".podstate-cache", "pip") for s in wanted.scratch_paths]
    place = max(candidates, key=lambda path: len(shlex.quote(path)))
    python = Python(executable=longest, version="x" * 256, ensurepip=True)
    environment = {name: place for name in ("TMPDIR", "PIP_CACHE_DIR", "UV_CACHE_DIR")}
    want = role.describe(spec, python, {**environment, "UV_LINK_MODE": "hardlink"})
    commands = [("building it", venv_ops.venv_command(want, longest))]
    if spec.snapshot:
        archive = posixpath.join(spec.snapshot, f"venv-{want.fingerprint[:12]}.tar.zst")
        restore = Snapshot(want.fingerprint, archive, compressor="zstd", sha256="0" * 64)
        commands.append(("restoring it", venv_ops.venv_command(want, longest, restore)))
    return commands
