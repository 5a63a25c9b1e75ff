"""One remote command per pod that returns everything the roles read (DESIGN: one round trip).

``PodProbe`` is a pyinfra fact; the parsers beside it are pure functions so they can be
unit-tested on real command output without a pod.
"""

from __future__ import annotations

import base64
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from podstate.procfs import unescape
from podstate.shell import b64, quote_path, script
from podstate.sizes import format_size, parse_mount_size

CAP_SYS_ADMIN = 21
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Managed files larger than this are not read: podstate rewrites a file's whole content
# inside one SSH command, and Linux caps one command line at 128 KiB (MAX_ARG_STRLEN); the
# content travels base64-encoded, a third larger.
MAX_FILE = 64 << 10
# The file in every podstate venv that records what it was built from (its fingerprint).
VENV_RECORD = ".podstate-venv"

# Filesystems whose data lives on another machine. Every FUSE filesystem counts too
# (sshfs, RunPod's MooseFS ``mfs#…`` network volumes show up as plain ``fuse``).
NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "glusterfs",
    "9p",
    "lustre",
    "gpfs",
    "beegfs",
    "moosefs",
    "mfs",
    "afs",
    "ncpfs",
    "ocfs2",
    "gfs2",
    "davfs",
    "virtiofs",
}


@dataclass(frozen=True)
class Mount:
    """One line of /proc/mounts."""

    source: str
    target: str
    fstype: str
    options: tuple[str, ...]

    @property
    def is_network(self) -> bool:
        """True for filesystems that are slow at metadata because they live elsewhere."""
        base = self.fstype.split(".", 1)[0]
        return base in ("fuse", "fuseblk") or base in NETWORK_FS or self.source.startswith("mfs#")

    @property
    def size(self) -> int | None:
        """The ``size=`` of a tmpfs in bytes, when the kernel shows it."""
        for option in self.options:
            if option.startswith("size="):
                return parse_mount_size(option[5:])
        return None


@dataclass(frozen=True)
class FileInfo:
    """What is at a managed file's path; a symbolic link is followed to its target."""

    state: str  # file | absent | dangling | loop | large | unreadable | directory | fifo | ...
    link: bool = False  # the path is a symbolic link
    target: str = ""  # the resolved path (the path itself when it is no link)
    mode: str | None = None  # octal permissions of the file, e.g. "644"
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


def parse_mounts(text: str) -> list[Mount]:
    """Return the mounts listed in /proc/mounts text, in order (later mounts hide earlier)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            source, target, fstype, options = (unescape(f) for f in fields[:4])
            mounts.append(Mount(source, target, fstype, tuple(options.split(","))))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """Return the mount that holds the absolute, resolved ``path`` (the last, longest match)."""
    best: Mount | None = None
    for mount in mounts:
        target = mount.target.rstrip("/") or "/"
        if path == target or path.startswith(target.rstrip("/") + "/"):
            if best is None or len(target) >= len(best.target.rstrip("/") or "/"):
                best = mount
    return best


def parse_gpu_list(text: str) -> list[str]:
    """Return the GPU names in ``nvidia-smi -L`` output (``GPU 0: NAME (UUID: …)``)."""
    names = []
    for line in text.splitlines():
        if line.startswith("GPU ") and ":" in line:
            names.append(line.split(":", 1)[1].split(" (UUID")[0].strip())
    return names


def parse_topology(text: str) -> dict[tuple[int, int], str]:
    """Return the GPU-to-GPU links of ``nvidia-smi topo -m``: {(i, j): "NV12" | "PHB" | …}.

    Only the GPU columns are read; NIC columns, affinities and the legend are skipped.
    """
    # nvidia-smi underlines the header row with ANSI escapes, even into a pipe.
    lines = [line for line in _ANSI.sub("", text).splitlines() if line.strip()]
    if not lines:
        return {}
    header = lines[0].split("\t")
    columns = {
        i: int(name[3:])
        for i, name in enumerate(header)
        if name.strip().startswith("GPU") and name.strip()[3:].isdigit()
    }
    links: dict[tuple[int, int], str] = {}
    for line in lines[1:]:
        cells = line.split("\t")
        row = cells[0].strip()
        if not (row.startswith("GPU") and row[3:].isdigit()):
            continue
        for index, gpu in columns.items():
            if index < len(cells):
                links[(int(row[3:]), gpu)] = cells[index].strip()
    return links


def all_nvlink(links: dict[tuple[int, int], str], count: int) -> bool:
    """True when every pair of the ``count`` GPUs is joined by NVLink (``NV#``)."""
    pairs = [(i, j) for i in range(count) for j in range(count) if i != j]
    return bool(pairs) and all(links.get(p, "").startswith("NV") for p in pairs)


# Run by the pod's interpreter for the venv role: its real path, version, and whether it has
# ensurepip (``python -m venv`` needs it to seed pip). One line each; no newline in any.
_PYTHON_INFO = (
    "import importlib.util, os, sys; print(os.path.realpath(sys.executable)); "
    "print(sys.version.replace(chr(10), ' ')); "
    "print(int(importlib.util.find_spec('ensurepip') is not None))"
)


def _venv_script(venv: dict[str, str]) -> list[str]:
    """Return the probe lines the venv role reads (``venv.*`` and ``arch``), read-only.

    ``venv`` has ``path`` (the venv symlink), ``python`` (the interpreter to find),
    ``uv`` (where podstate keeps its own uv) and optionally ``snapshot`` (a directory).
    """
    p, uv = quote_path(venv["path"]), quote_path(venv["uv"])
    lines = [
        'echo "arch $(uname -m)"',
        f'if [ -L {p} ]; then echo "venv.kind link $(readlink -- {p} | b64)"; '
        f"elif [ -d {p} ]; then echo 'venv.kind directory'; "
        f"elif [ -e {p} ]; then echo 'venv.kind file'; fi",
        f'if [ -f {p}/{VENV_RECORD} ]; then echo "venv.record $(b64 < {p}/{VENV_RECORD})"; fi',
        f"if {p}/bin/python -c '' >/dev/null 2>&1; then echo 'venv.works 1'; fi",
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
            f'if [ -f {s}/current ] && read -r f a z < {s}/current && [ -f {s}/"$a" ]; then'
            f' echo "venv.snapshot $(printf \'%s %s %s\' "$f" "$a" "$z" | b64)"; fi'
        )
    return lines


def _script(paths: list[str], files: list[str], venv: dict[str, str] | None = None) -> str:
    """Return the POSIX sh program the probe runs: read-only, one output line per item."""
    lines = [
        "export LC_ALL=C",
        "echo begin",
        "b64() { base64 | tr -d '\\n'; }",
        'echo "caps $(sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status)"',
        'echo "shm $(stat -f -c "%S %b" /dev/shm 2>/dev/null)"',
        'echo "disk $(stat -f -c "%S %a %b" / 2>/dev/null)"',
        'echo "mounts $(b64 < /proc/self/mounts)"',
        'echo "user $(id -un | b64)"',
        # The login shell sshd runs every command with: what must read podstate's profile.
        's=$(getent passwd "$(id -u)" 2>/dev/null) || s=$(grep "^$(id -un):" /etc/passwd); '
        'echo "shell $(printf %s "${s##*:}" | b64)"',
        "if command -v nvidia-smi >/dev/null 2>&1; then"
        ' echo "gpus $(timeout 20 nvidia-smi -L 2>/dev/null | b64)";'
        ' echo "topo $(timeout 20 nvidia-smi topo -m 2>/dev/null | b64)"; fi',
    ]
    for path in paths:
        q = quote_path(path)
        lines.append(
            f"k=$(stat -c %F:%a -- {q} 2>/dev/null) || k=-; r=$(realpath -m -- {q}); "
            f'echo "path {b64(path)} $(printf %s "$k" | tr " " _) $(printf %s "$r" | b64)"'
        )
    if files:
        lines.append(script("file_state.sh"))
        lines += [f"file_state {b64(path)} {quote_path(path)} {MAX_FILE}" for path in files]
    if venv:
        lines += _venv_script(venv)
    lines.append("echo end")
    return "\n".join(lines)


class PodProbe(FactBase[dict[str, Any]]):
    """
    Everything podstate's roles read from a pod, in one command.

    + paths: directories whose kind, mode, real path and filesystem matter
    + files: managed files whose current content matters (``~/`` means the SSH user's home)
    + venv: what the venv role needs (``path``, ``python``, ``uv``, ``snapshot``), or None

    .. code:: python

        {
            "can_mount": False,          # CAP_SYS_ADMIN in the login's effective set
            "shm_size": 67108864,        # /dev/shm in bytes, None if absent
            "disk_free": 2147483648,     # bytes free on / (the container disk), None if unknown
            "disk_size": 21474836480,
            "mounts": [Mount, ...],
            "gpus": ["NVIDIA H100 80GB HBM3", ...],   # [] without nvidia-smi
            "nvlink": True,              # every GPU pair on NVLink (False for < 2 GPUs)
            "paths": {"/scratch": {"kind": "directory", "mode": "1777",
                                   "real": "/scratch", "mount": Mount}},  # kind None: absent
            "files": {"~/.bashrc": FileInfo},   # every file asked for
            "user": "root",              # the SSH user
            "shell": "/bin/bash",        # its login shell (passwd), "" if unreadable
            "arch": "x86_64",            # uname -m; None unless venv was asked for
            "venv": None,                # None unless asked for, else:
            # {"kind": "link",           # what is at path: link | directory | file | None
            #  "target": ".venv-0123abcd4567",   # the link's target, None if not a link
            #  "record": "{...}",         # path/.podstate-venv (the fingerprint), None if absent
            #  "works": True,             # path/bin/python starts
            #  "python": {"executable": "/usr/bin/python3.11", "version": "3.11.2 (...)",
            #             "ensurepip": True},     # None: the interpreter is not on the pod
            #  "uv": "/usr/local/bin/uv", # uv on PATH, None if there is none
            #  "managed_uv": False,       # podstate's own uv is at venv["uv"]
            #  "zstd": True,              # the zstd command is there
            #  "free": 2147483648,        # bytes free where the venv is built, None if unknown
            #  "snapshot": {"fingerprint": "...", "archive": "venv-....tar.zst",
            #               "compressor": "zstd"}}  # None: no complete snapshot
        }
    """

    def command(
        self, paths: list[str], files: list[str], venv: dict[str, str] | None = None
    ) -> str:
        return _script(paths, files, venv)

    def process(self, output: list[str]) -> dict[str, Any]:
        """Return the parsed probe; an answer cut short or malformed fails this pod alone, with
        one line (pyinfra's fact error), and never stops the other pods."""
        if "begin" not in output or output[-1:] != ["end"]:
            raise FactProcessError("the pod's answer to the probe was cut short")
        # Lines before "begin" are what the login shell's startup files printed.
        begin = len(output) - output[::-1].index("begin")
        try:
            return parse_probe(output[begin:-1])
        except (ValueError, IndexError, TypeError, KeyError) as e:
            raise FactProcessError(f"the pod's answer to the probe is malformed ({e})") from None


def parse_probe(output: list[str]) -> dict[str, Any]:
    """Return the probe's documented dict from its output lines."""
    fields: dict[str, str] = {}
    paths: dict[str, dict[str, Any]] = {}
    files: dict[str, FileInfo] = {}
    venv_fields: dict[str, str] = {}
    for line in output:
        key, _, rest = line.partition(" ")
        if key == "path":
            name, kind_mode, real = (rest.split(" ") + ["", ""])[:3]
            kind, _, mode = kind_mode.partition(":")
            paths[_decode(name)] = {
                "kind": None if kind in ("", "-") else kind.replace("_", " "),
                "mode": mode or None,
                "real": _decode(real),
            }
        elif key == "file":
            name, info = parse_file(rest)
            files[name] = info
        elif key.startswith("venv."):
            venv_fields[key[5:]] = rest
        else:
            fields[key] = rest
    mounts = parse_mounts(_decode(fields.get("mounts", "")))
    for info in paths.values():
        info["mount"] = mount_of(info["real"], mounts)
    caps = int(fields.get("caps") or "0", 16)
    shm = fields.get("shm", "").split()
    disk = fields.get("disk", "").split()
    gpus = parse_gpu_list(_decode(fields.get("gpus", "")))
    return {
        "can_mount": bool(caps >> CAP_SYS_ADMIN & 1),
        "shm_size": int(shm[0]) * int(shm[1]) if len(shm) == 2 else None,
        "disk_free": int(disk[0]) * int(disk[1]) if len(disk) == 3 else None,
        "disk_size": int(disk[0]) * int(disk[2]) if len(disk) == 3 else None,
        "mounts": mounts,
        "gpus": gpus,
        "nvlink": all_nvlink(parse_topology(_decode(fields.get("topo", ""))), len(gpus)),
        "paths": paths,
        "files": files,
        "user": _decode(fields.get("user", "")).strip(),
        "shell": _decode(fields.get("shell", "")).strip(),
        "arch": fields.get("arch") or None,
        "venv": parse_venv(venv_fields) if "arch" in fields else None,
    }


def parse_file(rest: str) -> tuple[str, FileInfo]:
    """Return the path and the :class:`FileInfo` of one ``file`` line of the probe."""
    name, state, link, target, *more = rest.split(" ")
    if link not in ("0", "1") or not state:
        raise ValueError(f"bad file line for {_decode(name)!r}")
    mode, size = (more[0], int(more[1])) if len(more) >= 2 else (None, None)
    content = (more[2] if len(more) > 2 else "") if state == "file" else None
    info = FileInfo(
        state=state,
        link=link == "1",
        target="" if target == "-" else _decode(target),
        mode=mode,
        size=size,
        content=None if content is None else _decode(content),
    )
    return _decode(name), info


def parse_venv(fields: dict[str, str]) -> dict[str, Any]:
    """Return the probe's ``venv`` dict from its ``venv.*`` lines (keys without the prefix)."""
    kind, _, target = fields.get("kind", "").partition(" ")
    python = _decode(fields.get("python", "")).splitlines()
    snapshot = _decode(fields.get("snapshot", "")).split(" ")
    free = fields.get("free", "").split()
    return {
        "kind": kind or None,
        "target": _decode(target).removesuffix("\n") if kind == "link" else None,
        "record": _decode(fields["record"]) if "record" in fields else None,
        "works": fields.get("works") == "1",
        "python": (
            {"executable": python[0], "version": python[1], "ensurepip": python[2] == "1"}
            if len(python) >= 3
            else None
        ),
        "uv": _decode(fields.get("uv", "")) or None,
        "managed_uv": fields.get("managed_uv") == "1",
        "zstd": fields.get("zstd") == "1",
        "free": int(free[0]) * int(free[1]) if len(free) == 2 else None,
        "snapshot": (
            dict(zip(("fingerprint", "archive", "compressor"), snapshot, strict=True))
            if len(snapshot) == 3 and all(snapshot)
            else None
        ),
    }


def _decode(data: str) -> str:
    """Return base64 ``data`` as text; bytes that are not UTF-8 survive as surrogates, so a
    file written back from it is byte-for-byte what was read."""
    return base64.b64decode(data, validate=True).decode("utf-8", "surrogateescape")
