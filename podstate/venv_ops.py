"""pyinfra operations of the venv role: build, snapshot and restore a venv, provide uv.

roles/venv.py decides from the pod probe; these write the commands. Every command that
changes the pod runs under the run's pod lock (``operations.changing``).
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.command import FileUploadCommand

from podstate import settings
from podstate.operations import changing
from podstate.probe import VENV_RECORD
from podstate.shell import b64, quote_path

# Runs a long script under the pod's interpreter in a process group of its own, and kills
# that group when this command's stdout goes away (pyinfra killed, connection dropped):
# sshd leaves the commands of a dead session running, and a build nobody waits for must
# not switch the venv later behind the next run's back.
_SUPERVISOR = """\
import os, select, signal, subprocess, sys
child = subprocess.Popen(["/bin/sh", "-c", sys.argv[1]], start_new_session=True)
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

# Exits non-zero naming the requested distributions the venv lacks.
_HAS_DISTRIBUTIONS = """\
import importlib.metadata as m, sys
missing = []
for name in sys.argv[1:]:
    try:
        m.distribution(name)
    except m.PackageNotFoundError:
        missing.append(name)
if missing:
    sys.exit("requested but not installed: " + ", ".join(missing))
"""

# sh functions every venv script shares: fail with one line, run a step into the log.
_VENV_FUNCTIONS = """\
why() {
    if grep -q 'No space left on device' "$LOG" 2>/dev/null; then
        echo "no space left on device (container disk or scratch is full; log: $LOG)"
    else
        # The installer's last error with the first and last of its causes (uv prints a
        # chain); without one, the log's last line.
        line=$(awk '{ sub(/^[ \t]+/, ""); kind = $1; sub(/^[A-Za-z]+: /, "") } NF { tail = $0 }
            kind == "error:" || kind == "ERROR:" { e = $0; first = last = ""; next }
            kind == "cause:" { if (first == "") first = $0; last = $0 }
            END { if (e == "") { sub(/^[^A-Za-z0-9]+/, "", tail); print tail; exit }
                  if (first != "") e = e "; " first
                  if (last != first) e = e "; " last
                  print e }' "$LOG")
        echo "$(printf %s "$line" | cut -c 1-300) (log: $LOG)"
    fi
}
fail() {
    echo "podstate: venv $WHAT failed: $*" >&2
    [ "$MADE" = 0 ] || rm -rf -- "$V" "$V.part"
    exit 1
}
run() { "$@" >>"$LOG" 2>&1 || fail "$(why)"; }
"""


def _words(values: Iterable[str]) -> str:
    """Return ``values`` as sh words, each quoted."""
    return " ".join(shlex.quote(v) for v in values)


def _installer_environment(environment: dict[str, str]) -> str:
    """Return sh that gives the installer ``environment`` and nothing of the pod's own.

    PIP_* and UV_* variables (RunPod's point caches at the network volume) and pip/uv config
    files are ignored: what the venv holds is a function of the desired state alone.
    """
    exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in environment.items())
    return (
        "for v in $(env | sed -n -e 's/^\\(PIP_[A-Za-z0-9_]*\\)=.*/\\1/p'"
        " -e 's/^\\(UV_[A-Za-z0-9_]*\\)=.*/\\1/p'); do unset \"$v\" 2>/dev/null || true; done\n"
        "unset VIRTUAL_ENV PYTHONHOME PYTHONPATH PYTHONUSERBASE CONDA_PREFIX\n"
        "export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "
        f"UV_NO_CONFIG=1 UV_PYTHON_DOWNLOADS=never {exports}\n"
        'mkdir -p -- "$TMPDIR" "${PIP_CACHE_DIR:-$TMPDIR}" "${UV_CACHE_DIR:-$TMPDIR}" '
        '|| fail "cannot create the temporary and cache directories"\n'
        'rm -rf -- "$TMPDIR"/podstate-venv.*\n'
        'W=$(mktemp -d "$TMPDIR/podstate-venv.XXXXXX") || fail "cannot write to $TMPDIR"\n'
        "trap 'rm -rf -- \"$W\"' EXIT\n"
        'export TMPDIR="$W"\n'
    )


def supervised(python: str, script: str) -> str:
    """Return sh that runs ``script`` killed with the connection (see ``_SUPERVISOR``)."""
    return f"{shlex.quote(python)} -c {shlex.quote(_SUPERVISOR)} {shlex.quote(script)}"


def venv_script(
    path: str,
    version: str,
    fingerprint: str,
    record: str,
    python: str,
    requirements: str,
    distributions: list[str],
    installer: str,
    uv: str | None,
    index_args: list[str],
    environment: dict[str, str],
    restore: tuple[str, str] | None = None,
) -> str:
    """Return the sh script that builds (or restores) a venv beside ``path`` and switches.

    The venv is made at its versioned real path ``<parent>/<version>`` (so scripts'
    shebangs never change), verified, recorded, and only then ``path`` (a symlink) is
    swapped to it with one rename. Versions other than the new and the previous one are
    removed. ``restore`` is (archive, compressor): unpack it instead of installing.
    """
    parent, base = posixpath.split(path)
    parent = parent or "/"
    hexes = "[0-9a-f]" * 12
    what = "restore" if restore else "build"
    lines = [
        "set -eu",
        "export LC_ALL=C",
        f"L={shlex.quote(path)}; P={shlex.quote(parent)}; V=$P/{shlex.quote(version)}",
        f"PY={shlex.quote(python)}; UV={shlex.quote(uv or '')}; WHAT={what}; MADE=0",
        f'LOG=$P/.podstate/{shlex.quote(base)}.log; mkdir -p -- "$P/.podstate" && : >"$LOG" '
        '|| { echo "podstate: venv build failed: cannot write to $P" >&2; exit 1; }',
        'echo "podstate: $WHAT of $V started at $(date +%s.%N)" >>"$LOG"',
        _VENV_FUNCTIONS,
        _installer_environment(environment),
        f'ok() {{ [ -f "$V"/{VENV_RECORD} ] && grep -qF {fingerprint} "$V"/{VENV_RECORD} '
        "&& \"$V/bin/python\" -c '' 2>/dev/null; }",
        'cd "$W"',
        "if ok; then",
        '    echo "podstate: $V is already built" >>"$LOG"',
        "else",
        '    MADE=1; rm -rf -- "$V" "$V.part"',
    ]
    if restore:
        archive, compressor = restore
        snapshot = posixpath.dirname(archive)
        decompress = {"zstd": "zstd -dc", "gzip": "gzip -dc"}[compressor]
        lines += [
            f"    S={shlex.quote(snapshot)}; A={shlex.quote(archive)}",
            # A snapshot that cannot be restored is set aside, so the next run rebuilds.
            '    bad() { mv -f -- "$S/current" "$S/current.bad" 2>/dev/null || true; fail "$@"; }',
            '    mkdir -- "$V.part" || fail "cannot write to $P"',
            f'    ( {decompress} -- "$A" 2>>"$LOG" || echo x >"$W/bad" ) |'
            ' tar -xf - -C "$V.part" >>"$LOG" 2>&1 || bad "cannot unpack $A: $(why)"',
            '    [ ! -e "$W/bad" ] || bad "cannot read $A: $(why)"',
            '    mv -T -- "$V.part" "$V"',
            '    ok || bad "$A does not hold a working venv of this fingerprint"',
            '    echo "podstate: restored $V from $A" >>"$LOG"',
        ]
    else:
        lines.append(f'    printf %s {b64(requirements)} | base64 -d >"$W/requirements.txt"')
        if installer == "uv":
            lines += [
                '    run "$UV" venv --python "$PY" "$V"',
                '    run "$UV" pip install --python "$V/bin/python" '
                f'{_words(index_args)} -r "$W/requirements.txt"',
            ]
        else:
            lines += [
                '    run "$PY" -m venv "$V"',
                '    run "$V/bin/python" -m pip install '
                f'{_words(index_args)} -r "$W/requirements.txt"',
            ]
    check = (
        'if [ -n "$UV" ] && [ -x "$UV" ]; then run "$UV" pip check --python "$V/bin/python"; '
        'elif [ -x "$V/bin/pip" ]; then run "$V/bin/python" -m pip check; fi'
    )
    lines += [
        "fi",
        '"$V/bin/python" -c \'\' >>"$LOG" 2>&1 || fail "its interpreter does not start: $(why)"',
        f'run "$V/bin/python" -c {shlex.quote(_HAS_DISTRIBUTIONS)} {_words(distributions)}',
        check,
        f'printf %s {b64(record)} | base64 -d >"$V/{VENV_RECORD}.part"',
        f'mv -f -- "$V/{VENV_RECORD}.part" "$V/{VENV_RECORD}"',
        # The switch: one rename of a new symlink over the old one.
        'old=$(readlink -- "$L" 2>/dev/null || true); old=${old##*/}',
        f'if [ "$old" != {shlex.quote(version)} ]; then',
        f'    rm -f -- "$L.podstate-new"; ln -s {shlex.quote(version)} "$L.podstate-new"',
        '    mv -T -- "$L.podstate-new" "$L" || fail "cannot switch $L to $V"',
        "fi",
        f'for d in "$P"/.{shlex.quote(base)}-{hexes} "$P"/.{shlex.quote(base)}-{hexes}.part; do',
        '    [ -e "$d" ] || continue',
        f'    case ${{d##*/}} in {shlex.quote(version)} | "$old") ;; *) rm -rf -- "$d" ;; esac',
        "done",
        'echo "podstate: $WHAT of $V done at $(date +%s.%N)" >>"$LOG"',
    ]
    return "\n".join(lines) + "\n"


@operation()
def venv(
    path: str,
    version: str,
    fingerprint: str,
    ready: bool,
    script: str,
    python: str,
):
    """
    Build or restore a venv at its versioned path and switch ``path`` to it atomically.

    + path: the venv's stable path on the pod, a symlink podstate manages
    + version: the versioned directory beside it that will hold this venv
    + fingerprint: what was asked for, hashed (recorded in the venv)
    + ready: the probe found ``path`` working with this fingerprint
    + script: the build or restore script (``venv_script``), run only when not ready
    + python: the pod's interpreter, which supervises the script

    **Example:**

    .. code:: python

        venv(name="Venv /opt/venv: build", path="/opt/venv", version=".venv-0123abcd4567",
             fingerprint=fp, ready=False, script=venv_script(...), python="/usr/bin/python3",
             _timeout=1800)
    """
    if ready:
        host.noop(f"{path} is a working venv of fingerprint {fingerprint[:12]}")
        return
    yield changing(supervised(python, script), ttl=settings.VENV_TIMEOUT)


@operation()
def venv_snapshot(
    version_dir: str, directory: str, fingerprint: str, current: str | None, python: str
):
    """
    Pack a built venv as one archive in ``directory``, for restores after a pod restart.

    One large sequential file is what network volumes do well. It is written under a
    temporary name and renamed, then ``current`` (fingerprint, archive, compressor) is
    replaced the same way; older archives are removed.

    + version_dir: the venv's versioned directory on the pod
    + directory: where snapshots live (usually on the network volume)
    + fingerprint: the venv's fingerprint
    + current: the fingerprint of the snapshot the probe found there (None: none)
    + python: the pod's interpreter, which supervises the packing

    **Example:**

    .. code:: python

        venv_snapshot(name="Venv snapshot", version_dir="/opt/.venv-0123abcd4567",
                      directory="/workspace/.podstate/venv", fingerprint=fp, current=None,
                      python="/usr/bin/python3.11")
    """
    if current == fingerprint:
        host.noop(f"{directory} holds a snapshot of fingerprint {fingerprint[:12]}")
        return
    name = f"venv-{fingerprint[:12]}.tar"
    script = f"""set -eu
V={shlex.quote(version_dir)}; S={shlex.quote(directory)}; T=
fail() {{ echo "podstate: venv snapshot failed: $*" >&2; rm -f -- "$T"; exit 1; }}
if command -v zstd >/dev/null 2>&1; then z=zstd; A={name}.zst; c="zstd -q -T0 -3"
elif command -v pigz >/dev/null 2>&1; then z=gzip; A={name}.gz; c="pigz -1"
else z=gzip; A={name}.gz; c="gzip -1"; fi
T="$S/.$A.$(uname -n).$$.part"
mkdir -p -- "$S" || fail "cannot create $S"
[ -f "$V/{VENV_RECORD}" ] || fail "$V is not a built venv"
E=$(mktemp) || fail "cannot write a temporary file"; trap 'rm -f -- "$E"' EXIT
( tar -C "$V" -cf - . 2>"$E" || echo "tar failed: $(tail -n 1 "$E")" >"$E.bad" ) | $c >"$T" \
    || fail "cannot write $T (volume full?)"
[ ! -e "$E.bad" ] || {{ cat "$E.bad" >&2; rm -f "$E.bad"; fail "cannot pack $V"; }}
mv -f -- "$T" "$S/$A"
printf '%s %s %s\\n' {fingerprint} "$A" "$z" >"$S/.current.$$.part"
mv -f -- "$S/.current.$$.part" "$S/current"
for f in "$S"/venv-*.tar.* "$S"/.venv-*."$(uname -n)".*.part; do
    [ "$f" = "$S/$A" ] || rm -f -- "$f"
done
rm -f -- "$S/current.bad"
"""
    yield changing(supervised(python, script), ttl=settings.VENV_TIMEOUT)


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
def pip_install_uv(dest: str, python: str, index_args: list[str], environment: dict[str, str]):
    """
    Install uv with pip into a venv on local disk, and link its binary at ``dest``.

    For pods whose architecture differs from the control machine's, whose uv cannot be
    uploaded.

    + dest: where the uv binary must be (a symlink into the venv beside it)
    + python: the pod's interpreter
    + index_args: pip's index options
    + environment: TMPDIR and caches for pip, on local storage

    **Example:**

    .. code:: python

        pip_install_uv(name="Install uv", dest="/opt/.podstate/uv", python="/usr/bin/python3",
                       index_args=[], environment={"TMPDIR": "/scratch/tmp"})
    """
    directory = posixpath.dirname(dest)
    new, final = quote_path(dest + ".podstate-new"), quote_path(dest)
    script = "\n".join(
        [
            "set -eu",
            f"D={shlex.quote(directory)}; V=$D/uv-env; MADE=0; WHAT=uv-install",
            'LOG=$D/uv-install.log; mkdir -p -- "$D" && : >"$LOG"',
            _VENV_FUNCTIONS,
            _installer_environment(environment),
            f'rm -rf -- "$V"; run {shlex.quote(python)} -m venv "$V"',
            f'run "$V/bin/python" -m pip install {_words(index_args)} uv',
            f"rm -f -- {new}; ln -s uv-env/bin/uv {new}; mv -T -- {new} {final}",
        ]
    )
    yield changing(supervised(python, script), ttl=settings.VENV_TIMEOUT)
