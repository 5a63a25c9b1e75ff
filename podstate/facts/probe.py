"""One remote command per pod that returns everything the roles read (DESIGN: one round trip).

``PodProbe`` is a pyinfra fact. It runs the sections of the registry (podstate.facts.sections:
each a ``Section`` record in its module, beside its script lines, its parser and its typed
result) as one POSIX sh program, which travels on the command's stdin (``READER`` is the
command line), and hands each section's output lines to its parser. A value that is not
plain is sent once, at the end, with every other (scripts/enc.sh's spool,
podstate.facts.spool): one base64 encodes them all, and one tar reads every file's content,
however many files, processes or GPUs the sections read. The parsers are pure functions, so
they can be unit-tested on real command output without a pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from podstate.facts import section, spool
from podstate.facts.apt import Apt
from podstate.facts.boot import Boot
from podstate.facts.download import Download
from podstate.facts.files import FileInfo, PathInfo
from podstate.facts.gpu import GpuState
from podstate.facts.lock import LockReading
from podstate.facts.mounts import Mount
from podstate.facts.processes import Process
from podstate.facts.record import Made
from podstate.facts.repos import Repos
from podstate.facts.secrets import Hidden, SecretsState
from podstate.facts.section import Section
from podstate.facts.sections import SECTIONS
from podstate.facts.sessions import Session
from podstate.facts.venv import VenvState
from podstate.facts.work import Work
from podstate.shell import script

# The probe's command line, the same whatever it reads: the shell sources its program from
# its stdin (``payload``), so no declared path, file or name makes the command longer than
# these few bytes. Where stdin cannot be opened by name (a socket, not sshd's pipe), cat
# reads it.
READER = 'if true 2>/dev/null </dev/stdin; then . /dev/stdin; else eval "$(cat)"; fi'
WANTED_END = "@@podstate-wanted"  # ends the wanted secrets' here-document (base64 has no @)


@dataclass(frozen=True)
class Probe:
    """Everything podstate's roles read from a pod, as ``PodProbe`` returns it: the fields
    of the sections (their ``fields``), in the registry's order. A section read only when
    asked for (``Request``) is None when it was not."""

    lock: LockReading | None  # the pod lock; None if it was not read
    can_mount: bool  # CAP_SYS_ADMIN in the login's effective set
    shm_size: int | None  # /dev/shm in bytes; None if absent or unknown
    disk_free: int | None  # bytes free on / (the container disk); None if unknown
    disk_size: int | None  # the size of /, in bytes; None if unknown
    mounts: tuple[Mount, ...]  # /proc/self/mounts, in order (later mounts hide earlier)
    gpu: GpuState  # readable, devices, cuda; or why not (GpuState.error)
    # the GPUs' names; () without nvidia-smi or when unreadable (then gpu.readable is False)
    gpus: tuple[str, ...]
    nvlink: bool  # every GPU pair on NVLink (False for fewer than 2 GPUs)
    user: str  # the SSH user
    shell: str  # its login shell (passwd); "" if unreadable
    # the container start, ``BOOT_ID:TICKS`` (the boot id and process 1's start); None if
    # unreadable
    container_start: str | None
    paths: dict[str, PathInfo]  # each directory asked for (PathInfo.kind None: absent)
    files: dict[str, FileInfo]  # each managed file asked for (``~/``: the SSH user's home)
    arch: str | None  # ``uname -m``; None unless the venv was asked for
    venv: VenvState | None  # None: not asked
    work: Work  # what the pod's processes did since its idle period began
    # the processes whose environment sets a variable asked for (only those variables)
    processes: tuple[Process, ...]
    sessions: tuple[Session, ...]  # interactive sessions: terminals and notebook kernels
    free: dict[str, int | None]  # bytes free at each path asked; None: unknown
    # an entry in each directory asked for that has any ("?": one it cannot list)
    occupied: dict[str, str]
    download: Download | None  # the download test; None: not asked
    apt: Apt | None  # None: no package asked for
    repos: Repos | None  # None: no repository asked for
    boot: Boot | None  # the boot hook's identity and host keys; None: not asked
    made: Made | None  # the records of what podstate made; None: not asked
    # whether the secrets file and each value is the wanted one; None: not asked
    secrets: SecretsState | None

    def made_found(self) -> Made:
        """Return the ``made`` section, for code that runs only where its role asked for it
        (ValueError where none asked: a role that reads it must ask for it)."""
        if self.made is None:
            raise ValueError("the probe did not read the records of what podstate made")
        return self.made


class PodProbe(FactBase[Probe]):
    """
    Everything podstate's roles read from a pod, in one command: a :class:`Probe`.

    Its arguments are the sections' (podstate.facts.sections; ``Request.arguments()`` makes
    them from a ``Request``, whose fields say what each one reads), and ``lock_wait``, the
    seconds to wait for another run's live pod lock. The secrets section takes the names
    of the secrets to compare (None: the file is not read); the wanted file and values
    come on the command's stdin (``secrets.probe_stdin``, passed as pyinfra's ``_stdin``),
    and the probe answers only whether each is the same.
    """

    @section.taking(SECTIONS)  # pyinfra binds the fact's arguments by this signature
    def command(self, **arguments: Any) -> str:
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
    """Return the :class:`Probe` of its output lines: each section's parser reads the lines
    of its keys (a line's first word up to a dot: ``venv.kind`` is venv's)."""
    return Probe(**answer_of(SECTIONS, output))


def answer_of(sections: Sequence[Section], output: list[str]) -> dict[str, Any]:
    """Return the fields ``sections`` read from the probe's ``output`` lines, its values put
    back in their lines first (podstate.facts.spool)."""
    return section.parse(sections, spool.resolve(output))


def program(paths: list[str], files: list[str], **arguments: Any) -> str:
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
    return program_of(SECTIONS, {"paths": paths, "files": files, **arguments})


def program_of(sections: Sequence[Section], arguments: Mapping[str, Any]) -> str:
    """Return the program that runs ``sections`` for ``arguments``: their lines between the
    frame every probe has: ``begin`` and ``end`` lines, and the values kept by ``enc`` sent
    at the end (scripts/enc.sh's ``spool_end``), which also closes the GPUs' group."""
    return "\n".join(
        [
            "export LC_ALL=C",
            "echo begin",
            script("enc.sh"),
            "enc_s=1",
            *section.lines(sections, arguments),
            "spool_end; }",
            "echo end",
        ]
    )


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
