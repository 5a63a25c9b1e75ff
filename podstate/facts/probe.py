"""One remote command per pod that returns everything the roles read (DESIGN: one round trip).

``PodProbe`` is a pyinfra fact. It assembles the sections, one module each beside this one
(each holding its script lines, its parser and its typed result), into one POSIX sh program,
which travels on the command's stdin (``READER`` is the command line), and hands each
section's output lines to its parser. A value that is not plain is sent once,
at the end, with every other (scripts/enc.sh's spool, podstate.facts.spool): one base64
encodes them all, and one tar reads every file's content, however many files, processes or
GPUs the sections read. The parsers are pure functions, so they can be unit-tested on real
command output without a pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from podstate.facts import apt as apt_section
from podstate.facts import boot as boot_section
from podstate.facts import download as download_section
from podstate.facts import files as files_section
from podstate.facts import gpu, lock, processes, sessions, space, spool, work
from podstate.facts import made as made_section
from podstate.facts import repos as repos_section
from podstate.facts import secrets as secrets_section
from podstate.facts import start as start_section
from podstate.facts import venv as venv_section
from podstate.facts.apt import Apt
from podstate.facts.boot import Boot
from podstate.facts.decode import decode
from podstate.facts.download import Download
from podstate.facts.files import FileInfo, PathInfo
from podstate.facts.gpu import GpuState
from podstate.facts.lock import LockReading
from podstate.facts.mounts import Mount, parse_mounts
from podstate.facts.processes import Process
from podstate.facts.record import Made
from podstate.facts.repos import Repos
from podstate.facts.secrets import Hidden, SecretsState
from podstate.facts.sessions import Session
from podstate.facts.venv import VenvState
from podstate.facts.work import Work
from podstate.shell import script

CAP_SYS_ADMIN = 21
# The probe's command line, the same whatever it reads: the shell sources its program from
# its stdin (``payload``), so no declared path, file or name makes the command longer than
# these few bytes. Where stdin cannot be opened by name (a socket, not sshd's pipe), cat
# reads it.
READER = 'if true 2>/dev/null </dev/stdin; then . /dev/stdin; else eval "$(cat)"; fi'
WANTED_END = "@@podstate-wanted"  # ends the wanted secrets' here-document (base64 has no @)


@dataclass(frozen=True)
class Probe:
    """Everything podstate's roles read from a pod, as ``PodProbe`` returns it: one field per
    section. A section read only when asked for (``Request``) is None when it was not."""

    can_mount: bool  # CAP_SYS_ADMIN in the login's effective set
    shm_size: int | None  # /dev/shm in bytes; None if absent or unknown
    disk_free: int | None  # bytes free on / (the container disk); None if unknown
    disk_size: int | None  # the size of /, in bytes; None if unknown
    mounts: tuple[Mount, ...]  # /proc/self/mounts, in order (later mounts hide earlier)
    gpu: GpuState  # readable, devices, cuda; or why not (GpuState.error)
    # the GPUs' names; () without nvidia-smi or when unreadable (then gpu.readable is False)
    gpus: tuple[str, ...]
    nvlink: bool  # every GPU pair on NVLink (False for fewer than 2 GPUs)
    paths: dict[str, PathInfo]  # each directory asked for (PathInfo.kind None: absent)
    files: dict[str, FileInfo]  # each managed file asked for (``~/``: the SSH user's home)
    free: dict[str, int | None]  # bytes free at each path asked; None: unknown
    # an entry in each directory asked for that has any ("?": one it cannot list)
    occupied: dict[str, str]
    # the processes whose environment sets a variable asked for (only those variables)
    processes: tuple[Process, ...]
    sessions: tuple[Session, ...]  # interactive sessions: terminals and notebook kernels
    work: Work  # what the pod's processes did since its idle period began
    user: str  # the SSH user
    shell: str  # its login shell (passwd); "" if unreadable
    arch: str | None  # ``uname -m``; None unless the venv was asked for
    download: Download | None  # the download test; None: not asked
    venv: VenvState | None  # None: not asked
    apt: Apt | None  # None: no package asked for
    repos: Repos | None  # None: no repository asked for
    # whether the secrets file and each value is the wanted one; None: not asked
    secrets: SecretsState | None
    lock: LockReading | None  # the pod lock; None if it was not read
    boot: Boot | None  # the boot hook's identity and host keys; None: not asked
    made: Made | None  # the records of what podstate made; None: not asked
    # the container start, ``BOOT_ID:TICKS`` (the boot id and process 1's start); None if
    # unreadable
    container_start: str | None

    def made_found(self) -> Made:
        """Return the ``made`` section, for code that runs only where its role asked for it
        (ValueError where none asked: a role that reads it must ask for it)."""
        if self.made is None:
            raise ValueError("the probe did not read the records of what podstate made")
        return self.made


class PodProbe(FactBase[Probe]):
    """
    Everything podstate's roles read from a pod, in one command: a :class:`Probe`.

    + paths: directories whose kind, mode, real path and filesystem matter
    + files: managed files whose current content matters (``~/`` means the SSH user's home)
    + venv: what the venv role needs (``path``, ``python``, ``uv``, ``distributions``,
      ``snapshot``), or None
    + apt: Debian packages whose dpkg status matters, or None
    + repos: repositories (``path``, ``ref``, ``ask``: ask origin where a branch is) whose
      checkout matters, or None
    + environ: variables whose value in running processes matters
    + inert: names (/proc/PID/comm) of processes whose environment is not read
    + free: paths whose free space matters
    + occupied: directories where whether anything is in them matters
    + download: the download test (``url``, ``seconds``), or None
    + lock_wait: seconds to wait for another run's live pod lock
    + boot: the boot hook's (``keys``: the directory of the saved host keys to compare, or
      None), or None
    + made: the records of what podstate made (``volume``: where the volume's is), or None
    + secrets: names of the secrets to compare, or None (the file is not read); the wanted
      file and values come on the command's stdin (``secrets.probe_stdin``, passed as
      pyinfra's ``_stdin``), and the probe answers only whether each is the same
    """

    def command(  # pyinfra binds the fact's arguments by this signature: each one, by name
        self,
        paths: list[str],
        files: list[str],
        venv: dict[str, str] | None = None,
        free: list[str] | None = None,
        occupied: list[str] | None = None,
        download: dict[str, Any] | None = None,
        apt: list[str] | None = None,
        repos: list[dict[str, Any]] | None = None,
        secrets: list[str] | None = None,
        environ: list[str] | None = None,
        inert: list[str] | None = None,
        lock_wait: int = 0,
        boot: dict[str, Any] | None = None,
        made: dict[str, Any] | None = None,
    ) -> str:
        """Return ``READER``, the probe's command line whatever it reads: the program for these
        arguments comes on the command's stdin (``payload``, passed as pyinfra's ``_stdin``)."""
        return READER

    def process(self, output: list[str]) -> Probe:
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


def parse_probe(output: list[str]) -> Probe:
    """Return the :class:`Probe` of its output lines: each line goes to its section by its
    first word up to a dot (``venv.kind`` to venv's, ``file`` to files')."""
    sections: dict[str, list[str]] = {}
    for line in spool.resolve(output):
        sections.setdefault(line.partition(" ")[0].partition(".")[0], []).append(line)

    def value(key: str) -> str | None:
        """Return the value of the last ``key`` line, None when there is none."""
        found = sections.get(key)
        return found[-1].partition(" ")[2] if found else None

    mounts = parse_mounts(decode(value("mounts") or ""))
    state, names, nvlink = gpu.parse(sections.get("gpu", []), value("topo") or "")
    sizes = space.parse(sections.get("fs", []))
    return Probe(
        can_mount=bool(int(value("caps") or "0", 16) >> CAP_SYS_ADMIN & 1),
        shm_size=sizes.shm_size,
        disk_free=sizes.disk_free,
        disk_size=sizes.disk_size,
        mounts=tuple(mounts),
        gpu=state,
        gpus=tuple(names),
        nvlink=nvlink,
        paths=files_section.parse_paths(sections.get("path", []), mounts),
        files=files_section.parse_files(sections.get("file", [])),
        free=space.parse_free(sections.get("free", [])),
        occupied=files_section.parse_occupied(sections.get("occupied", [])),
        processes=processes.parse(sections.get("proc", [])),
        sessions=sessions.parse(sections.get("sess", [])),
        work=work.parse(sections.get("work", [])),
        download=download_section.parse(value("download")),
        user=decode(value("user") or "").strip(),
        shell=decode(value("shell") or "").strip(),
        arch=value("arch") or None,
        venv=venv_section.parse(sections.get("venv", [])) if "arch" in sections else None,
        apt=apt_section.parse(sections["apt"]) if "apt" in sections else None,
        repos=repos_section.parse(sections["repo"]) if "repo" in sections else None,
        secrets=secrets_section.parse(sections["secrets"]) if "secrets" in sections else None,
        lock=lock.parse(sections.get("lock")),
        boot=boot_section.parse(sections["boot"]) if "boot" in sections else None,
        made=made_section.parse(sections["made"]) if "made" in sections else None,
        container_start=start_section.parse(value("cstart")),
    )


def program(
    paths: list[str],
    files: list[str],
    venv: dict[str, str] | None = None,
    free: list[str] | None = None,
    occupied: list[str] | None = None,
    download: dict[str, Any] | None = None,
    apt: list[str] | None = None,
    repos: list[dict[str, Any]] | None = None,
    secrets: list[str] | None = None,
    environ: list[str] | None = None,
    inert: list[str] | None = None,
    lock_wait: int = 0,
    boot: dict[str, Any] | None = None,
    made: dict[str, Any] | None = None,
) -> str:
    """Return the POSIX sh program the probe runs (``payload`` sends it), for ``PodProbe``'s
    arguments: one output line per item, read-only but for podstate's own GPU cache
    (GPU_CACHE, on the container disk), the container's identity (ID_CACHE, beside it)
    and idle period (IDLE_RECORD, where its processes worked since it began:
    podstate.facts.work).

    The GPUs are read beside the rest (scripts/gpu_state.sh): one nvidia-smi query,
    started first and collected last; the topology and CUDA version come from the cache
    once a probe of this container has read them. Another run's live pod lock is waited
    for up to ``lock_wait`` seconds, so that an apply plans from what that run left, not
    from a pod halfway through it.
    """
    lines = [
        "export LC_ALL=C",
        "echo begin",
        script("enc.sh"),
        "enc_s=1",
        # the mounts, read by the shell itself: a line of /proc/self/mounts holds no NUL
        'm=; while IFS= read -r l; do m="$m$l\n"; done </proc/self/mounts; enc "$m"; m=$enc_v',
        *gpu.start_lines(),
        *lock.probe_lines(lock_wait),
        # The shell's own capabilities, which the commands it starts as root keep, and
        # its user id
        'while read -r k v; do case $k in CapEff:) echo "caps $v"; break ;;'
        " Uid:) i=${v#*[!0-9]}; i=${i%%[!0-9]*} ;; esac; done </proc/self/status",
        space.STATFS,
        'echo "mounts $m"',
        # The user and the login shell sshd runs every command with (what must read
        # podstate's profile): from /etc/passwd, else as the system's name service says.
        "u= s=; { while IFS=: read -r n _ x _ _ _ h; do"
        ' [ "$x" = "$i" ] && u=$n s=$h && break; done </etc/passwd; } 2>/dev/null;'
        ' if [ -z "$u" ]; then u=$(id -un); s=$(getent passwd "$u" 2>/dev/null);'
        ' s=${s##*:}; fi; enc "$u"; echo "user $enc_v"; enc "$s"; echo "shell $enc_v"',
        start_section.PROBE_LINE,
        *files_section.probe_lines(paths, files),
        *(venv_section.probe_lines(venv) if venv else []),
        # the work first: it reads each process's /proc/PID/stat, which the other two reuse
        *work.probe_lines(),
        *processes.probe_lines(environ or [], inert or []),
        *sessions.probe_lines(),
        *space.free_lines(free or []),
        *files_section.occupied_lines(occupied or []),
        *([download_section.probe_line(download["url"], download["seconds"])] if download else []),
        *(apt_section.probe_lines(apt) if apt else []),
        *repos_section.probe_lines(repos or []),
        *boot_section.probe_lines(boot),
        *made_section.probe_lines(made, [*files, *paths]),
    ]
    if secrets is not None:
        lines += secrets_section.probe_lines(secrets)
    lines += [gpu.END, "spool_end; }", "echo end"]
    return "\n".join(lines)


def payload(arguments: dict[str, Any], wanted: Sequence[str] | None = None) -> Hidden:
    """Return the probe's stdin for ``arguments`` (``PodProbe``'s) and ``wanted``
    (``secrets.probe_stdin``'s lines, if the secrets are read): ``sourced`` of its program."""
    return sourced(program(**arguments), wanted)


def sourced(text: str, wanted: Sequence[str] | None = None) -> Hidden:
    """Return the stdin from which ``READER`` runs the sh program ``text``: it in one brace
    group, which the shell parses whole before it runs any of it, so a program cut short on
    the way runs nothing; with ``wanted``, those lines as a here-document on file descriptor
    3, where the secrets section reads them. No other command of the program reads its
    stdin. Shown as ``(hidden)``: pyinfra prints a fact's ``_stdin`` in its "Loaded fact"
    line."""
    head = "exec </dev/null"
    if wanted is not None:
        head += f" 3<<'{WANTED_END}'\n" + "".join(f"{line}\n" for line in wanted) + WANTED_END
    return Hidden(["{", head, text, "}"])
