"""One remote command per pod that returns everything the roles read (DESIGN: one round trip).

``PodProbe`` is a pyinfra fact; the parsers beside it are pure functions so they can be
unit-tested on real command output without a pod.
"""

from __future__ import annotations

import base64
import csv
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from podstate.limits import MAX_FILE
from podstate.operations import boot as boot_ops
from podstate.operations import repos as repo_ops
from podstate.operations import secrets as secret_ops
from podstate.operations.venv import SNAPSHOT_CURRENT, VENV_RECORD, read_snapshot
from podstate.paths import GPU_CACHE, LOCK
from podstate.procfs import unescape
from podstate.shell import b64, quote_path, script
from podstate.sizes import format_size, parse_mount_size

CAP_SYS_ADMIN = 21
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What the probe asks nvidia-smi about each GPU, in one query: each field, and the GpuDevice
# attribute it fills. Releases rename fields (clocks_throttle_reasons.* are aliases of
# clocks_event_reasons.* for now); a field the pod's release does not know is asked without,
# and only its reading is unknown (GpuState.unknown).
GPU_FIELDS = {
    "index": "index",
    "name": "name",
    "memory.total": "memory_mib",
    "driver_version": "driver",
    "temperature.gpu": "temperature",
    "ecc.mode.current": "ecc_mode",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected",
    "retired_pages.pending": "retired_pending",
    "remapped_rows.pending": "remap_pending",
    "clocks_throttle_reasons.hw_slowdown": "hw_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown": "hw_thermal",
    "clocks_throttle_reasons.sw_thermal_slowdown": "sw_thermal",
    "clocks_throttle_reasons.hw_power_brake_slowdown": "power_brake",
    "pcie.link.width.current": "link_width",
    "pcie.link.width.max": "link_width_max",
}
_NUMBERS = {"memory_mib", "temperature", "ecc_uncorrected", "link_width", "link_width_max"}

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


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as ``nvidia-smi --query-gpu`` reads it; None where it says N/A, or where the
    pod's nvidia-smi does not know the field (GpuState.unknown says which)."""

    index: int
    name: str = ""
    memory_mib: int | None = None
    driver: str = ""
    temperature: int | None = None
    ecc_mode: str | None = None  # "Enabled" | "Disabled"; None without ECC
    ecc_uncorrected: int | None = None  # volatile uncorrected ECC errors
    retired_pending: str | None = None  # "Yes" | "No"
    remap_pending: str | None = None  # "Yes" | "No"
    hw_slowdown: str | None = None  # "Active" | "Not Active"
    hw_thermal: str | None = None
    sw_thermal: str | None = None
    power_brake: str | None = None
    link_width: int | None = None
    link_width_max: int | None = None


@dataclass(frozen=True)
class GpuState:
    """What the pod's GPUs are, or why that is unknown."""

    readable: bool  # False: nvidia-smi is there but failed; everything else is unknown
    error: str | None = None  # its message, when not readable
    present: bool = True  # nvidia-smi is on the pod (False: a CPU pod)
    devices: tuple[GpuDevice, ...] = ()
    cuda: str | None = None  # the highest CUDA version the driver supports
    unknown: tuple[str, ...] = ()  # fields of GPU_FIELDS this nvidia-smi rejects: unknown


def _na(value: str) -> str | None:
    return None if value.strip().strip("[]") in ("N/A", "Not Supported", "") else value.strip()


def _int(value: str) -> int | None:
    value = _na(value) or ""
    return int(float(value)) if value.replace(".", "", 1).isdigit() else None


def parse_gpu_query(
    text: str, fields: tuple[str, ...] = tuple(GPU_FIELDS)
) -> tuple[GpuDevice, ...]:
    """Return the GPUs of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``,
    ``fields`` being those of GPU_FIELDS the query asked, in order; a GPU without ``index``
    has its row's number."""
    devices = []
    rows = [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]
    for number, row in enumerate(rows):
        if len(row) != len(fields):
            raise ValueError(f"nvidia-smi answered {len(row)} fields, not {len(fields)}")
        values: dict[str, Any] = {"index": number}
        for field, cell in zip(fields, row, strict=True):
            attribute, cell = GPU_FIELDS[field], cell.strip()
            if attribute == "index":
                values[attribute] = int(cell)
            elif attribute in ("name", "driver"):
                values[attribute] = cell
            else:
                values[attribute] = _int(cell) if attribute in _NUMBERS else _na(cell)
        devices.append(GpuDevice(**values))
    return tuple(devices)


def parse_cuda_version(header: str) -> str | None:
    """Return the "CUDA Version" of plain ``nvidia-smi`` output's header, if it shows one."""
    match = re.search(r"CUDA Version:\s*([0-9.]+)", header)
    return match[1] if match else None


def parse_gpu(fields: dict[str, str]) -> GpuState:
    """Return the GPU state from the probe's ``gpu.*`` lines (absent: a pod without GPUs)."""
    if "query" not in fields:
        return GpuState(readable=True, present=False)
    unknown = tuple(fields["unknown"].split(",")) if fields.get("unknown") else ()
    if not set(unknown) <= set(GPU_FIELDS):
        raise ValueError(f"nvidia-smi fields not asked: {fields['unknown']}")
    status, _, data = fields["query"].partition(" ")
    text = _decode(data)
    if status != "0":
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        why = lines[0] if lines else f"no output (exit status {status})"
        if status == "124":
            why = "nvidia-smi did not answer within 20 s"
        return GpuState(readable=False, error=why, unknown=unknown)
    return GpuState(
        readable=True,
        devices=parse_gpu_query(text, tuple(f for f in GPU_FIELDS if f not in unknown)),
        cuda=parse_cuda_version(_decode(fields.get("header", ""))),
        unknown=unknown,
    )


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


# What dpkg-query prints per package: its name and status (``ii``: installed).
DPKG_FORMAT = "${Package} ${db:Status-Abbrev}\\n"


def _apt_script(packages: list[str]) -> list[str]:
    """Return the probe lines the packages role reads, read-only: ``apt.get 1`` when apt-get
    is there (else 0), and ``apt.status`` with what dpkg knows of each of ``packages`` (one
    dpkg has never seen prints nothing)."""
    names = " ".join(shlex.quote(p) for p in packages)
    query = f"dpkg-query -W -f {shlex.quote(DPKG_FORMAT)} -- {names} 2>/dev/null"
    return [
        "if command -v apt-get >/dev/null 2>&1; then echo 'apt.get 1'; else echo 'apt.get 0'; fi",
        f'if command -v dpkg-query >/dev/null 2>&1; then echo "apt.status $({query} | b64)"; fi',
    ]


def parse_apt(fields: dict[str, str]) -> dict[str, Any]:
    """Return the probe's ``apt`` dict from its ``apt.*`` lines (keys without the prefix).

    A package counts as installed when dpkg's status is installed, or installed with only
    its triggers pending (``ii``, ``iW``, ``it``: its files are in place and configured).
    """
    installed = set()
    for line in _decode(fields.get("status", "")).splitlines():
        name, _, status = line.partition(" ")
        if status[1:2] in ("i", "W", "t"):
            installed.add(name.split(":", 1)[0])
    return {
        "apt_get": fields.get("get") == "1",
        "dpkg": "status" in fields,
        "installed": sorted(installed),
    }


def _download_script(url: str, seconds: int) -> str:
    """Return probe lines that download ``url`` for at most ``seconds`` and print
    ``download STATUS BYTES SECONDS`` (curl, else Python); STATUS 0 when it measured."""
    python = (
        "import sys, time, urllib.request\n"
        "url, limit = sys.argv[1], float(sys.argv[2]); n = 0; start = time.monotonic()\n"
        "with urllib.request.urlopen(url, timeout=limit) as r:\n"
        "    while time.monotonic() - start < limit and (b := r.read(65536)):\n"
        "        n += len(b)\n"
        "print(n, time.monotonic() - start)"
    )
    u = shlex.quote(url)
    return (
        "if command -v curl >/dev/null 2>&1; then"
        f" d=$(curl -sS -o /dev/null -m {seconds} -w '%{{size_download}} %{{time_total}}' {u}"
        " 2>/dev/null); r=$?; [ $r = 28 ] && r=0;"
        f" else d=$(python3 -c {shlex.quote(python)} {u} {seconds} 2>/dev/null); r=$?; fi;"
        ' echo "download $r $d"'
    )


class PodProbe(FactBase[dict[str, Any]]):
    """
    Everything podstate's roles read from a pod, in one command.

    + paths: directories whose kind, mode, real path and filesystem matter
    + files: managed files whose current content matters (``~/`` means the SSH user's home)
    + venv: what the venv role needs (``path``, ``python``, ``uv``, ``distributions``,
      ``snapshot``), or None
    + apt: Debian packages whose dpkg status matters, or None
    + repos: repositories (``path``, ``ref``, ``ask``: ask origin where a branch is) whose
      checkout matters, or None
    + secrets: names of the secrets to compare, or None (the file is not read); the wanted
      file and values come on the command's stdin (``secret_ops.probe_stdin``, passed as
      pyinfra's ``_stdin``), and the probe answers only whether each is the same

    .. code:: python

        {
            "can_mount": False,          # CAP_SYS_ADMIN in the login's effective set
            "shm_size": 67108864,        # /dev/shm in bytes, None if absent
            "disk_free": 2147483648,     # bytes free on / (the container disk), None if unknown
            "disk_size": 21474836480,
            "mounts": [Mount, ...],
            "gpu": GpuState,             # readable, devices (GpuDevice), cuda; or error
            "gpus": ["NVIDIA H100 80GB HBM3", ...],   # names; [] without nvidia-smi or when
                                         # unreadable (then gpu.readable is False)
            "nvlink": True,              # every GPU pair on NVLink (False for < 2 GPUs)
            "paths": {"/scratch": {"kind": "directory", "mode": "1777",
                                   "real": "/scratch", "mount": Mount}},  # kind None: absent
            "files": {"~/.bashrc": FileInfo},   # every file asked for
            "free": {"/workspace": 53687091200},  # bytes free at each path asked; None: unknown
            "download": {"mbps": 812.5, "status": 0},  # None: not asked; mbps None: failed
            "processes": [{"pid": 212, "command": "jupyter-lab",   # processes of the pod whose
                           "environ": {"PIP_CACHE_DIR": "..."}}],  # environment sets an
                                         # ``environ`` variable (only those variables)
            "user": "root",              # the SSH user
            "shell": "/bin/bash",        # its login shell (passwd), "" if unreadable
            "arch": "x86_64",            # uname -m; None unless venv was asked for
            "venv": None,                # None unless asked for, else:
            # {"kind": "link",           # what is at path: link | directory | file | None
            #  "target": ".venv-0123abcd4567",   # the link's target, None if not a link
            #  "record": "{...}",         # path/.podstate-venv (the fingerprint), None if absent
            #  "works": True,             # path/bin/python starts
            #  "missing": ["idna"],       # requested distributions without a *.dist-info in
            #                             # its site-packages; None: nothing at path
            #  "python": {"executable": "/usr/bin/python3.11", "version": "3.11.2 (...)",
            #             "ensurepip": True},     # None: the interpreter is not on the pod
            #  "uv": "/usr/local/bin/uv", # uv on PATH, None if there is none
            #  "managed_uv": False,       # podstate's own uv is at venv["uv"]
            #  "zstd": True,              # the zstd command is there
            #  "free": 2147483648,        # bytes free where the venv is built, None if unknown
            #  "snapshot": {"fingerprint": "...", "archive": "venv-....tar.zst",
            #               "compressor": "zstd", "sha256": "..."}}  # None: no complete
            #                                                        # snapshot
            "apt": None,                 # None unless packages were asked for, else:
            # {"apt_get": True,          # apt-get is on the pod
            #  "dpkg": True,             # dpkg-query is on the pod (it answered)
            #  "installed": ["tmux"]}    # the packages asked for that dpkg has installed
            "repos": None,               # None unless asked for; see repo_ops.parse
            "secrets": None,             # None unless asked for; see secret_ops.parse
            "boot": None,                # None unless asked for; see boot_ops.parse
        }
    """

    def command(  # pyinfra binds the fact's arguments by this signature: each one, by name
        self,
        paths: list[str],
        files: list[str],
        venv: dict[str, str] | None = None,
        free: list[str] | None = None,
        download: dict[str, Any] | None = None,
        apt: list[str] | None = None,
        repos: list[dict[str, Any]] | None = None,
        secrets: list[str] | None = None,
        environ: list[str] | None = None,
        lock_wait: int = 0,
        boot: dict[str, Any] | None = None,
    ) -> str:
        """Return the POSIX sh program the probe runs: one output line per item, read-only
        but for podstate's own GPU cache (GPU_CACHE, on the container disk).

        The GPUs are read beside the rest (scripts/gpu_state.sh): one nvidia-smi query,
        started first and collected last; the topology and CUDA version come from the cache
        once a probe of this container has read them. Another run's live pod lock is waited
        for up to ``lock_wait`` seconds, so that an apply plans from what that run left, not
        from a pod halfway through it.
        """
        lines = [
            "export LC_ALL=C",
            "echo begin",
            # base64 on one line; -w0 (GNU, busybox) saves a process for each value. The
            # mounts are the first value, and tell whether it works.
            "if m=$(base64 -w0 </proc/self/mounts 2>/dev/null); then b64() { base64 -w0; };"
            " else b64() { base64 | tr -d '\\n'; }; m=$(b64 </proc/self/mounts); fi",
            # The GPUs are read beside everything else (nvidia-smi can take seconds): started
            # first, their lines copied out at the end. The rest keeps the probe's stdin.
            script("gpu_state.sh"),
            "exec 4<&0",
            f"gpu_state {','.join(GPU_FIELDS)} {GPU_CACHE} </dev/null | {{ exec 5<&0 <&4 4<&-",
            f"L={LOCK}",
            'live() { [ -d "$L" ] && e= && { read -r e <"$L/expires"; } 2>/dev/null &&'
            ' [ "$(date +%s)" -le "${e:-0}" ]; }',
            f"n=0; while [ $n -lt {lock_wait * 5} ] && live; do sleep 0.2; n=$((n + 1)); done",
            'g=; { read -r g <"$L.gen"; } 2>/dev/null;'
            ' if live; then echo "lock ${g:-0} held"; else echo "lock ${g:-0} free"; fi',
            # enc VALUE sets enc_v to what the parser reads back as VALUE: "=VALUE" when VALUE
            # is plain (no process at all), else its base64 (which never starts with "=")
            'enc() { case $1 in *[!A-Za-z0-9/._+,:@%=-]*) enc_v=$(printf %s "$1" | b64) ;;'
            ' *) enc_v="=$1" ;; esac; }',
            # The shell's own capabilities, which the commands it starts as root keep, and
            # its user id
            'while read -r k v; do case $k in CapEff:) echo "caps $v" ;;'
            " Uid:) i=${v#*[!0-9]}; i=${i%%[!0-9]*} ;; esac; done </proc/self/status",
            # One line per filesystem stat answers for (none for a missing /dev/shm)
            'stat -f -c "fs %n %S %a %b" / /dev/shm 2>/dev/null',
            'echo "mounts $m"',
            # The user and the login shell sshd runs every command with (what must read
            # podstate's profile): from /etc/passwd, else as the system's name service says.
            "u= s=; { while IFS=: read -r n _ x _ _ _ h; do"
            ' [ "$x" = "$i" ] && u=$n s=$h && break; done </etc/passwd; } 2>/dev/null;'
            ' if [ -z "$u" ]; then u=$(id -un); s=$(getent passwd "$u" 2>/dev/null);'
            ' s=${s##*:}; fi; enc "$u"; echo "user $enc_v"; enc "$s"; echo "shell $enc_v"',
        ]
        if paths or files:
            lines.append(script("stats.sh"))
        if paths:
            lines.append("stats -P %a:%F " + " ".join(quote_path(path) for path in paths))
            lines += [
                f'real {quote_path(path)}; enc "$r"; echo "path {b64(path)} $enc_v $st_{i}"'
                for i, path in enumerate(paths, 1)
            ]
        if files:
            lines.append(script("file_state.sh"))
            lines.append("stats -L '%a %s %F' " + " ".join(quote_path(path) for path in files))
            lines += [
                f'file_state {b64(path)} {quote_path(path)} {MAX_FILE} "$st_{i}"'
                for i, path in enumerate(files, 1)
            ]
        if venv:
            lines += _venv_script(venv)
        if environ:
            lines.append(script("processes.sh"))
            names = "|".join(re.escape(name) for name in environ)
            lines.append(f"processes {shlex.quote(names)}")
        for path in free or []:
            lines.append(
                f'echo "free {b64(path)} $(stat -f -c "%S %a" -- {quote_path(path)} 2>/dev/null)"'
            )
        if download:
            lines.append(_download_script(download["url"], download["seconds"]))
        if apt:
            lines += _apt_script(apt)
        lines += repo_ops.probe_lines(repos or [])
        lines += boot_ops.probe_lines(boot)
        if secrets is not None:
            lines.insert(0, secret_ops.KEEP_STDIN)
            lines += secret_ops.probe_lines(secrets)
        lines += ["while IFS= read -r g <&5; do printf '%s\\n' \"$g\"; done; }", "echo end"]
        return "\n".join(lines)

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
    free: dict[str, int | None] = {}
    statfs: dict[str, list[str]] = {}
    processes: list[dict[str, Any]] = []
    venv_fields: dict[str, str] = {}
    gpu_fields: dict[str, str] = {}
    apt_fields: dict[str, str] = {}
    repo_lines: list[str] = []
    secret_lines: list[str] = []
    boot_fields: dict[str, str] = {}
    for line in output:
        key, _, rest = line.partition(" ")
        if key == "path":  # path NAME REAL MODE:KIND ("-" when absent); KIND may have spaces
            name, real, mode_kind = (rest.split(" ", 2) + ["", ""])[:3]
            mode, _, kind = mode_kind.partition(":")
            paths[_decode(name)] = {
                "kind": kind or None,
                "mode": mode if kind else None,
                "real": _decode(real),
            }
        elif key == "file":
            name, info = parse_file(rest)
            files[name] = info
        elif key == "proc":
            pid, comm, environ_b64 = rest.split(" ")
            processes.append(
                {
                    "pid": int(pid),
                    "command": _decode(comm).strip(),
                    "environ": dict(
                        line.split("=", 1)
                        for line in _decode(environ_b64).splitlines()
                        if "=" in line
                    ),
                }
            )
        elif key == "fs":
            name, *numbers = rest.split(" ")
            statfs[name] = numbers
        elif key == "free":
            name, *numbers = rest.split(" ")
            free[_decode(name)] = int(numbers[0]) * int(numbers[1]) if len(numbers) == 2 else None
        elif key.startswith("venv."):
            venv_fields[key[5:]] = rest
        elif key.startswith("gpu."):
            gpu_fields[key[4:]] = rest
        elif key.startswith("apt."):
            apt_fields[key[4:]] = rest
        elif key == "repo" or key.startswith("repo."):
            repo_lines.append(line)
        elif key.startswith("secrets."):
            secret_lines.append(line)
        elif key.startswith("boot."):
            boot_fields[key[5:]] = rest
        else:
            fields[key] = rest
    mounts = parse_mounts(_decode(fields.get("mounts", "")))
    for info in paths.values():
        info["mount"] = mount_of(info["real"], mounts)
    caps = int(fields.get("caps") or "0", 16)
    shm = statfs.get("/dev/shm", [])  # block size, blocks free, blocks
    disk = statfs.get("/", [])
    gpu = parse_gpu(gpu_fields)
    gpus = [device.name for device in gpu.devices]
    return {
        "can_mount": bool(caps >> CAP_SYS_ADMIN & 1),
        "shm_size": int(shm[0]) * int(shm[2]) if len(shm) == 3 else None,
        "disk_free": int(disk[0]) * int(disk[1]) if len(disk) == 3 else None,
        "disk_size": int(disk[0]) * int(disk[2]) if len(disk) == 3 else None,
        "mounts": mounts,
        "gpu": gpu,
        "gpus": gpus,
        "nvlink": all_nvlink(parse_topology(_decode(fields.get("topo", ""))), len(gpus)),
        "paths": paths,
        "files": files,
        "free": free,
        "processes": processes,
        "download": parse_download(fields.get("download")),
        "user": _decode(fields.get("user", "")).strip(),
        "shell": _decode(fields.get("shell", "")).strip(),
        "arch": fields.get("arch") or None,
        "venv": parse_venv(venv_fields) if "arch" in fields else None,
        "apt": parse_apt(apt_fields) if apt_fields else None,
        "repos": repo_ops.parse(repo_lines) if repo_lines else None,
        "secrets": secret_ops.parse(secret_lines) if secret_lines else None,
        "lock": parse_lock(fields.get("lock")),
        "boot": boot_ops.parse(boot_fields, _decode) if boot_fields else None,
    }


def parse_lock(line: str | None) -> dict[str, Any] | None:
    """Return the pod lock as the probe read it (``gen``: how many times it was taken;
    ``held``: by a live run), None if it was not read."""
    if not line:
        return None
    gen, held = line.split(" ")
    return {"gen": int(gen), "held": held == "held"}


def parse_download(line: str | None) -> dict[str, Any] | None:
    """Return the download test's result: ``{"mbps": rate}``, ``mbps`` None when the download
    failed; None when none was asked for."""
    if line is None:
        return None
    status, *numbers = line.split()
    if status != "0" or len(numbers) != 2 or float(numbers[1]) <= 0:
        return {"mbps": None, "status": int(status)}
    return {"mbps": float(numbers[0]) * 8 / 1e6 / float(numbers[1]), "status": 0}


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
    free = fields.get("free", "").split()
    return {
        "kind": kind or None,
        "target": _decode(target).removesuffix("\n") if kind == "link" else None,
        "record": _decode(fields["record"]) if "record" in fields else None,
        "works": fields.get("works") == "1",
        "missing": fields["missing"].split() if "missing" in fields else None,
        "python": (
            {"executable": python[0], "version": python[1], "ensurepip": python[2] == "1"}
            if len(python) >= 3
            else None
        ),
        "uv": _decode(fields.get("uv", "")) or None,
        "managed_uv": fields.get("managed_uv") == "1",
        "zstd": fields.get("zstd") == "1",
        "free": int(free[0]) * int(free[1]) if len(free) == 2 else None,
        "snapshot": read_snapshot(_decode(fields.get("snapshot", ""))),
    }


def _decode(data: str) -> str:
    """Return a probe value as text: ``=`` then the value itself (the probe's ``enc`` for a
    plain value), else base64, whose bytes that are not UTF-8 survive as surrogates, so a
    file written back from it is byte-for-byte what was read."""
    if data.startswith("="):
        return data[1:]
    return base64.b64decode(data, validate=True).decode("utf-8", "surrogateescape")
