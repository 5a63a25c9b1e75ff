"""Directories and variables: one managed profile that every shell kind reads last.

``ssh pod CMD`` runs the SSH user's login shell with ``-c``. For bash, that reads ~/.bashrc
(Debian/Ubuntu bash is built to do so for sshd) but stops at its early return for
non-interactive shells; ``bash -lc`` reads /etc/profile.d; ``bash -ic`` reads all of
~/.bashrc, including RunPod's ``source /etc/rp_environment`` appended at its end. So the
profile lives in /etc/profile.d and ~/.bashrc sources it both first (before the early
return) and last (after /etc/rp_environment, whose values it must override). zsh reads
~/.zshenv in every kind of shell, so that gets the same two hooks. A login shell podstate
cannot hook (fish, dash, ...) is a violation: no declared variable would reach it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from importlib.resources import files

from pyinfra import host

from podstate import nccl
from podstate.desired.state import State
from podstate.facts import blocks, made
from podstate.facts.probe import Probe
from podstate.facts.processes import Process
from podstate.facts.record import DirEntry, FileEntry
from podstate.facts.request import Request
from podstate.paths import DECLARED, ENV_FILES, HOOKED, KERNEL_STARTUP, PROFILE, SECRETS_FILE
from podstate.roles import files as files_role
from podstate.roles import scratch
from podstate.run import bookkeeping, findings
from podstate.run.role import role

# HOOKED: the file each login shell podstate can hook reads in every kind of shell.
# HOOK is an `if`, not `[ -r P ] && . P`: that list fails when P is missing, and a `set -e`
# script sourcing ~/.bashrc would stop there.
# DECLARED and KERNEL_STARTUP: what a notebook kernel reads, the declared values as data and
# IPython's startup file that applies them (the Jupyter server predates the apply).
MARK_BEGIN = "# >>> podstate >>>"
MARK_END = "# <<< podstate <<<"
HOOK = (
    f"{MARK_BEGIN} managed: sources {PROFILE}, keep this block first and last\n"
    f"if [ -r {PROFILE} ]; then . {PROFILE}; fi\n"
    f"{MARK_END}\n"
)
STICKY = {"TMPDIR": "1777"}
# Processes (their /proc/PID/comm) whose old values cannot reach Python, pip or uv work: a
# keep-alive (RunPod's start script ends in `sleep infinity`), web servers (its nginx),
# cron and syslog daemons, sshd. Every other process matters: an interpreter, a Jupyter
# server or kernel, a shell that outlived its session, a supervisor and what it runs. The
# desired state's `processes: {inert: [...], matter: [...]}` adds names to this list or
# takes them off.
INERT = frozenset(
    {"sleep", "tail", "nginx", "apache2", "httpd", "caddy", "cron", "crond", "atd",
     "rsyslogd", "syslogd", "dbus-daemon", "sshd"}
)  # fmt: skip
BOOT_ADVICE = (
    "it was started with the container (not from an SSH session), so every container start "
    "brings it back with the old values: arm the boot hook (boot: {hook: true}), which gives "
    "the start script the declared values"
)
BOOT_ARMED = (
    "it was started with the container (not from an SSH session); the boot hook gives the "
    "start script the declared values from the next container start on"
)
# What RunPod's start script appends to ~/.bashrc at every container start.
RUNPOD_LINE = "source /etc/rp_environment\n"


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the scratch paths (a directory below one
    that gets a new tmpfs counts as missing) and every ``dirs`` directory; the profile, the
    files that hook it and what notebook kernels read; and, in running processes, every
    variable the profile may declare."""
    names = {*(wanted.dirs or {}), *(wanted.env or {}), *nccl.NAMES}
    dirs = wanted.dir_paths
    parents = (*made.ancestors(PROFILE), *made.ancestors(KERNEL_STARTUP))
    parents += tuple(p for path in dirs for p in made.ancestors(path))
    own = Request(
        paths=tuple(dict.fromkeys((*dirs, *parents))),
        files=tuple(ENV_FILES),
        environ=tuple(sorted(names)),
        inert=tuple(sorted(inert_names(wanted))),
    )
    return scratch.reads(wanted).merge(own)


def inert_names(wanted: State) -> frozenset[str]:
    """Return the process names (/proc/PID/comm) whose old values do not matter: INERT, with
    the desired state's ``processes.inert`` added and its ``processes.matter`` taken off."""
    mine = wanted.processes
    if mine is None:
        return INERT
    return (INERT | frozenset(mine.inert)) - frozenset(mine.matter)


def stale_processes(
    declared: dict[str, str],
    processes: Iterable[Process],
    inert: frozenset[str] = INERT,
    hook: bool = False,
) -> list[str]:
    """Return, for each process that matters (its name is not in ``inert``) started before
    the apply with a declared variable at another value, what it has and what to do.
    podstate never restarts or signals it.

    One started with the container, not from an SSH session (``ssh`` False), comes back
    with the old values at every container start: its message also says to arm the boot
    hook, or, where ``hook`` is armed, that the next container start gives it the declared
    values.
    """
    stale = []
    for process in processes:
        if process.command in inert:
            continue
        old = {
            name: value
            for name, value in sorted(process.environ.items())
            if name in declared and value != declared[name]
        }
        if old:
            has = ", ".join(f"{name}={value}" for name, value in old.items())
            want = ", ".join(f"{name}={declared[name]}" for name in old)
            message = (
                f"{process.command} (pid {process.pid}) still has {has}; restart it to "
                f"pick up {want}"
            )
            if not process.ssh:
                message += "; " + (BOOT_ARMED if hook else BOOT_ADVICE)
            stale.append(message)
    return stale


def render_profile(
    variables: dict[str, str], path: list[str], sources: list[str] | None = None
) -> str:
    """Return the profile: ``variables`` exported literally, ``path`` prepended to PATH once,
    then each file of ``sources`` sourced when the shell's user may read it (the root-only
    secrets file: another user's shell skips it, and the profile still succeeds).

    Every value is single-quoted, so nothing in it is expanded or run by any shell; PATH
    entries are added only when missing, so sourcing the profile twice changes nothing.
    """
    lines = ["# Managed by podstate: overwritten on every run. Edit the desired state instead."]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in variables.items()]
    for entry in reversed(path):
        q = shlex.quote(entry)
        lines.append(f'case ":$PATH:" in *:{q}:*) ;; *) PATH={q}:"$PATH" ;; esac')
    if path:
        lines.append("export PATH")
    lines += [f"if [ -r {shlex.quote(f)} ]; then . {shlex.quote(f)}; fi" for f in sources or []]
    return "\n".join(lines) + "\n"


def render_hooks(current: str | None, keep_runpod_tail: bool = False) -> str:
    """Return ``current`` with podstate's hook as its first and last block, once each, and
    every line of the user's between them as it was (``blocks.split``: a lone mark goes, and
    the lines beside it stay; the last line gets its ``\\n``).

    With ``keep_runpod_tail``, a file that has them already, followed only by RunPod's
    ``source /etc/rp_environment`` line, is returned as it is: the boot hook put the blocks
    back at a container start, then RunPod's start script appended its line, and wrote
    /etc/rp_environment from the declared values the hook gave it. The caller asks for it
    only while the profile those values came from is unchanged.
    """
    if keep_runpod_tail and current:
        head = current
        while head.endswith("\n" + RUNPOD_LINE):
            head = head[: -len(RUNPOD_LINE)]
        if head != current and render_hooks(head) == head:
            return current
    body = "".join(blocks.split(current or "", MARK_BEGIN, MARK_END).lines)
    return HOOK + body + ("\n" if body and not body.endswith("\n") else "") + HOOK


def unmendable(path: str, current: str | None) -> None:
    """Record a violation for each lone mark of podstate's block in the user's file ``path``
    (which holds ``current``): ``render_hooks`` keeps every line beside it, podstate's
    included, since which are podstate's cannot be told."""
    lone = blocks.split(current or "", MARK_BEGIN, MARK_END).lone
    if lone:
        findings.violation(
            f"{blocks.lost(path, MARK_BEGIN, MARK_END, lone)}: podstate cannot tell that "
            "block's lines from yours, so it keeps every line beside the mark as yours and "
            f"takes out only the mark; a line left of podstate's block (`. {PROFILE}`) is "
            "harmless, delete it by hand",
            "env.block",
        )


@role("Environment", reads)
def apply(wanted: State, probe: Probe) -> None:
    """Create the ``dirs``, write the profile (with the NCCL guards) and its hooks.

    A directory below a scratch path that gets a new tmpfs in this run is hidden by it,
    so it counts as missing.
    """
    cloud = host.data.get("cloud", "COMMUNITY")
    count = len(probe.gpus) if probe.gpu.readable else None
    extra = nccl.variables(wanted.nccl, cloud, count, probe.nvlink, probe.files[PROFILE].content)
    dirs, env = dict(wanted.dirs or {}), dict(wanted.env or {})
    prepend = list(wanted.path or ())
    sources = [SECRETS_FILE] if wanted.secrets is not None else []
    if not dirs and not env and not extra and not prepend and not sources:
        return
    modes: dict[str, str | None] = {}
    for name, path in dirs.items():
        mount = probe.paths[path].mount
        if mount is not None and mount.is_network:
            findings.violation(
                f"dirs.{name} = {path} is on the network filesystem {mount.fstype} "
                f"({mount.source} at {mount.target}): small-file I/O there stalls pip, uv and "
                "temp files for minutes; point it at scratch or the container disk",
                f"dirs.{name}",
            )
        modes[path] = modes.get(path) or STICKY.get(name)
    old, run = made.previous(probe.made), findings.of(host)
    for path in modes:  # made by podstate: missing now, or so its record says
        if (probe.paths[path].kind is None or path in old) and not run.makes(path):  # scratch
            findings.made(DirEntry(path))
            files_role.made_directories(path, probe, old)  # mkdir -p makes them too
    if dirs:
        bookkeeping.directories(
            name="Directories named in dirs",
            paths=modes,
            found=probe.paths,
            hidden=scratch.fresh_mounts(wanted, probe),
        )
    profile = render_profile({**dirs, **env, **extra}, prepend, sources)
    declared = {"variables": {**dirs, **env, **extra}, "path": prepend, "sources": sources}
    startup = files("podstate.scripts").joinpath("ipython-startup.py").read_text()
    declared_text = json.dumps(declared, indent=1) + "\n"
    # What the boot hook puts back where the GPUs it finds are not these: the NCCL guards
    # as for GPUs that cannot be read (an unknown never drops a guard).
    guards = nccl.variables(wanted.nccl, cloud, None, probe.nvlink)
    safe = {**dirs, **env, **guards}
    safe_declared = {"variables": safe, "path": prepend, "sources": sources}
    safe_text = json.dumps(safe_declared, indent=1) + "\n"
    for name, path, content, guarded in (
        (f"Profile {PROFILE}", PROFILE, profile, render_profile(safe, prepend, sources)),
        (f"Declared values {DECLARED}", DECLARED, declared_text, safe_text),
        ("Notebook kernels' startup file", KERNEL_STARTUP, startup, startup),
    ):
        bookkeeping.owned_file(name, path, content, probe)
        findings.restorable(path, content, "644", guarded)
        findings.made(FileEntry(path, made.sums(content, guarded)))
        files_role.made_directories(path, probe, old)
    hook = wanted.boot is not None and wanted.boot.hook
    inert = inert_names(wanted)
    for process in stale_processes({**dirs, **env, **extra}, probe.processes, inert, hook):
        findings.violation(process, "env.stale_process")
    unchanged = probe.files[PROFILE].content == profile
    for path in hooked_files(probe.user, probe.shell):
        found = probe.files[path]
        bookkeeping.managed_file(
            name=f"Hooks in {path}",
            path=path,
            content=render_hooks(found.content, keep_runpod_tail=unchanged),
            found=found,
            own=False,
        )
        unmendable(path, found.content)
        findings.hooked(path)
        was = made.previous(probe.made).get(path)
        findings.made(made.block(path, MARK_BEGIN, MARK_END, was, absent=found.state == "absent"))


def hooked_files(user: str, shell: str) -> list[str]:
    """Return the files to hook the profile into: ~/.bashrc always (bash is how scripts and
    terminals start), and the login shell's own file; record a violation when the login
    shell cannot be hooked or read, since no declared variable would reach ``ssh pod CMD``."""
    name = shell.rsplit("/", 1)[-1]
    if name not in HOOKED:
        found = f"is {shell}, which podstate cannot hook" if shell else "could not be read"
        findings.violation(
            f"the login shell of {user or 'the SSH user'} {found}: `ssh pod CMD` runs it, and "
            "it reads neither ~/.bashrc nor /etc/profile.d, so TMPDIR, the caches and every "
            f"declared variable would be missing; make bash or zsh its shell (chsh -s /bin/bash"
            f" {user or 'root'})",
            "env.shell",
        )
    return list(dict.fromkeys([HOOKED["bash"], HOOKED.get(name, HOOKED["bash"])]))
