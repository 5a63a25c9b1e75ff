"""The boot hook: a pod that comes back in state by itself after a restart.

With ``boot: {hook: true}``, every apply writes a POSIX sh hook (scripts/boot.sh) where a
restart keeps it (``Layout``: on RunPod the pod's volume, ``<volume>/.podstate/boot.sh``; on
Vast, whose stop keeps the container disk, ``/var/lib/podstate/boot.sh``) and, in a
root-only directory beside it, its data: the files podstate's roles write on the container
disk, exactly as they render them (the profile and what it declares, the notebook startup
file, ``files`` entries, ``podstate-ready``), podstate's block for the shell files it hooks,
the scratch mounts and directories, the venv's restore from its snapshot, the ready marker's
digest, what the hook must leave pending for the next apply (secrets, apt packages,
repositories, ``authorized_keys``), the pod it is for, and a checksum of it all. With
``host_keys: keep``, the pod's host keys are saved there too. The template's container start
command (on Vast its onstart script) sources the hook at every container start, before the
image's start script, so the start script and everything it starts have the declared
environment.

The role is among the last phases of the run (podstate.pod.phases), so that the data is
written only after every other change succeeded, and holds the ready marker only when no
violation stands. It also says, for the check, what the hook did at this container's start
(``findings.boot``).
"""

from __future__ import annotations

import posixpath
import shlex
from datetime import date
from typing import Any

from pyinfra import host

from podstate import settings
from podstate.desired.state import State
from podstate.facts.boot import ENVIRON, BootRequest, provider
from podstate.facts.files import FileInfo
from podstate.facts.made import sums
from podstate.facts.marker import digest, read
from podstate.facts.probe import Probe
from podstate.facts.record import DataEntry, HookEntry, KeysEntry
from podstate.facts.request import Request
from podstate.facts.venv import SNAPSHOT_CURRENT, Snapshot
from podstate.limits import MAX_FILE
from podstate.operations import boot as boot_ops
from podstate.operations import venv as venv_ops
from podstate.operations.boot import FLAG, Layout
from podstate.paths import READY_MARKER
from podstate.roles import env, scratch, venv
from podstate.run import bookkeeping, findings, lock
from podstate.run.role import role
from podstate.shell import b64, quote_path


def volume(wanted: State) -> Layout:
    """Return where podstate keeps what outlives the container, with or without the hook:
    the volume at ``boot.volume`` (``/workspace`` by default), and the hook where this
    pod's provider keeps it (podstate.facts.boot.provider)."""
    return Layout(wanted.volume, provider())


def layout(wanted: State) -> Layout | None:
    """Return where the hook lives, None when no hook is asked for."""
    return volume(wanted) if wanted.boot and wanted.boot.hook else None


def has_volume(probe: Probe, where: Layout) -> bool:
    """Return whether a filesystem is mounted at ``where.volume``: a plain directory there
    is on the container disk, which a restart wipes (RunPod's start script makes
    /workspace on a pod without a volume)."""
    info = probe.paths.get(where.volume)
    if info is None:
        return False
    mount = info.mount
    return info.kind == "directory" and mount is not None and mount.target == info.real


def gpus(probe: Probe) -> str:
    """Return the GPUs as the hook compares them at a container start (scripts/boot.sh):
    their count and ``nvlink`` (every pair on NVLink) or ``other``; ``unknown -`` when they
    cannot be read."""
    if not probe.gpu.readable:
        return "unknown -"
    return f"{len(probe.gpus)} {'nvlink' if probe.nvlink else 'other'}"


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role (nothing without a hook): the volume and the data
    directory; the hook, its data, this container's status of it; the container's identity (the
    provider's variables), and with ``keep`` the data directory, to compare the host keys saved
    there with the pod's; and what the data is made from: the scratch paths, the ``dirs``
    directories and the venv's reading (for its restore)."""
    places = (*wanted.scratch_paths, *wanted.dir_paths)
    where = layout(wanted)
    if where is None:
        return Request()
    keep = _keep(wanted)
    own = Request(
        paths=(where.volume, where.data, *places),
        files=(where.hook, where.state, FLAG),
        boot=BootRequest(keys=where.data if keep else None, identity=where.identity),
    )
    return own.merge(venv.reads(wanted))


def _keep(wanted: State) -> bool:
    """Return whether the hook keeps the pod's SSH host keys (``boot.host_keys: keep``)."""
    return wanted.boot is not None and wanted.boot.host_keys == "keep"


def _on(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _kib(size: int) -> int:
    """Return ``size`` bytes in KiB, rounded up to whole pages as tmpfs sizes are."""
    return -(-size // bookkeeping.PAGE) * bookkeeping.PAGE // 1024


# Words the venv's restore command gets from the snapshot's current file at boot.
_HOW, _ARCHIVE, _SHA = "@podstate-how@", "@podstate-archive@", "@podstate-sha256@"


def restore_command(want: venv_ops.Venv, snapshot: str) -> str:
    """Return sh that restores ``want`` from its snapshot in ``snapshot`` under the pod
    lock, as the venv role's restore does (scripts/venv.sh), with the archive, compressor
    and sha256 read at boot from the snapshot's current file, which must name this
    fingerprint. It takes the lock with the token in ``$podstate_token``, the hook's own."""
    archive = posixpath.join(snapshot, _ARCHIVE)
    placeholder = Snapshot(want.fingerprint, archive, compressor=_HOW, sha256=_SHA)
    words = venv_ops.venv_words(want, "", placeholder)
    own = {_HOW: '"$z"', archive: quote_path(snapshot.rstrip("/") + "/") + '"$a"', _SHA: '"$h"'}
    run = " ".join(own.get(word, shlex.quote(word)) for word in words)
    current = quote_path(posixpath.join(snapshot, SNAPSHOT_CURRENT))
    inner = (
        f"if ! read -r f a z h <{current}; then echo 'podstate: venv snapshot: no current"
        " file to restore from' >&2; exit 1; fi; "
        f'if [ "$f" != {want.fingerprint} ]; then echo "podstate: venv snapshot: it is of'
        f' another venv ($f), not {want.fingerprint[:12]}" >&2; exit 1; fi; {run}'
    )
    return lock.guarded(
        inner,
        settings.VENV_TIMEOUT,
        release=True,
        token=lock.Raw('"$podstate_token"'),
        owner="podstate boot hook",
    )


def entries(wanted: State, probe: Probe, marker: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """Return the hook's data entries (scripts/boot.sh) for ``wanted`` on this pod, from
    what the roles decided and rendered while they were planned (the ready marker's only
    with ``marker``: no violation stands), and the files whose whole content the data holds
    as its own lines (``text`` entries; path and content): each is on the pod as the apply
    writes the data, written before it or found so by the probe, so the apply copies it
    there from the file instead of sending it twice."""

    found, volume = findings.of(host), wanted.volume
    out = [f"gpus {gpus(probe)}\n"]
    public = probe.boot.public if probe.boot else None
    if _keep(wanted) and public:
        out.append(f"keys {public}\n")
    for path in scratch.ordered(wanted, probe):  # parents first, as the apply mounts them
        info, item = probe.paths[path], (wanted.scratch or {})[path]
        mount = info.mount
        own = mount if mount is not None and mount.target == info.real else None
        if (
            (own is not None and own.fstype != "tmpfs")
            or (not probe.can_mount and own is None and mount is not None and mount.is_network)
            or scratch.in_the_way(info)
        ):
            continue  # a violation: nothing to put back
        kind = "tmpfs" if probe.can_mount else "dir"
        out.append(f"scratch {kind} {_kib(item.size)} {item.mode} {path}\n")
    for name, path in (wanted.dirs or {}).items():
        mount = probe.paths[path].mount
        if not (_on(path, volume) or path in wanted.scratch_paths or mount and mount.is_network):
            out.append(f"dir {env.STICKY.get(name, '-')} {path}\n")
    if wanted.shm and probe.can_mount:
        out.append(f"shm {_kib(wanted.shm.min_size)}\n")
    texts: list[tuple[str, str]] = []
    for path, file in found.restorable.items():
        content, mode, safe = file.content, file.mode, file.safe
        if _on(path, volume):
            continue
        safe = None if safe == content else safe
        # there as the data is written: its role wrote it before (one the probe has not read
        # yet is new: a copy of the user's file) or found it so, unless it cannot
        seen = probe.files.get(path) or FileInfo("absent")
        there = file.before and not bookkeeping.file_problem(path, seen, True)
        if boot_ops.is_text(content) and there:
            lines = f"{content.count(boot_ops.NL)} {mode} {path}\n"
            out.append(f"text {lines}" if safe is None else f"guarded-text {lines}{b64(safe)}\n")
            texts.append((path, content))
        elif safe is None:
            out.append(boot_ops.file_entry("file", f"{mode} {path}", content))
        else:
            out.append(boot_ops.file_entry("guarded", f"{mode} {path}", content) + b64(safe) + "\n")
    marks = f"{b64(env.MARK_BEGIN)} {b64(env.MARK_END)}"
    for path in found.hooked:
        out.append(boot_ops.file_entry("hook", f"{marks} {path}", env.HOOK))
    apt = wanted.packages.apt if wanted.packages else ()
    if apt:
        out.append(f"apt {' '.join(apt)}\n")
    if wanted.secrets is not None:
        out.append("pending secrets: never kept on the volume; the next apply writes them\n")
    if wanted.authorized_keys:
        out.append("pending authorized_keys: the next apply puts podstate's block back\n")
    for path in wanted.repos or {}:
        if not _on(path, volume):
            out.append(f"pending repos.{path}: the next apply clones it\n")
    spec = wanted.venv
    if spec:
        python = probe.venv.python if probe.venv else None
        if not spec.snapshot:
            out.append("pending venv: without venv.snapshot, the next apply builds it\n")
        elif python is None:
            out.append("pending venv: its interpreter is not on the pod\n")
        else:
            parent = posixpath.dirname(probe.paths[spec.path].real)
            environment = venv.work_environment(wanted, probe, parent)
            # a restore links nothing from uv's cache: the same command whatever is mounted
            environment["UV_LINK_MODE"] = "copy"
            want = venv.describe(spec, python, environment)
            fields = f"{want.fingerprint} {spec.snapshot}"
            out.append(boot_ops.file_entry("venv", fields, restore_command(want, spec.snapshot)))
    if marker:
        out.append(f"marker {digest(wanted)}\n")
    return out, texts


def report(wanted: State, probe: Probe, where: Layout) -> dict[str, Any]:
    """Return what the hook did at this container's start, for the check: ``outcome``
    (armed: podstate set it up in this container, which started without it; not-run: the
    container started after it was set up, and it did not run; skipped, running, restored
    or pending, as its status says: ``boot_ops.parse_status``), with ``reason``,
    ``pending`` (what still waits for an apply: nothing once the pod is ready for this
    desired state), ``errors`` and ``started_at``."""
    text = this_start(probe)
    first = text.split("\n", 1)[0]
    none: dict[str, Any] = {"reason": None, "pending": [], "errors": [], "started_at": None}
    if first == "armed":
        result = {"outcome": "armed", **none}
    elif first == "not-run" or (
        not text and boot_ops.state_pod(probe.files[where.state].content) == host.name
    ):
        result = {
            "outcome": "not-run",
            **none,
            "reason": "the container started after podstate set the hook up, and the hook did "
            "not run: " + where.how_to_run(),
        }
    elif not text:
        result = {"outcome": "armed", **none}
    else:
        result = boot_ops.parse_status(text)
    ready = read(probe.files.get(READY_MARKER)) or {}
    start = probe.container_start
    if ready.get("digest") == digest(wanted) and ready.get("container", start) == start:
        result["pending"] = []
    return result


def declare(wanted: State) -> None:
    """Say what the hook makes on the volume (for the record of what podstate made:
    roles/removal.py), from the desired state alone: the hook, its data and, with ``keep``,
    the archived host keys; so a violation that stops this role removes none of them."""
    where = layout(wanted)
    if where is None:
        return
    findings.made(HookEntry(where.hook, sums(boot_ops.render_hook(where))))
    findings.made(DataEntry(where.data))
    if _keep(wanted):
        findings.made(KeysEntry(posixpath.join(where.data, "hostkeys.tar")))


def this_start(probe: Probe) -> str:
    """Return this container's status of the hook (``FLAG``), "" when there is none or it
    is from another container start (it names one, ``boot_ops.status_start``): Vast keeps
    the container disk across a stop, and the flag with it."""
    flag = probe.files[FLAG]
    text = flag.content if flag.state == "file" and flag.content else ""
    start = boot_ops.status_start(text)
    return text if start is None or start == probe.container_start else ""


@role("Boot", reads, when=layout)
def apply(wanted: State, probe: Probe) -> None:
    """Write the hook and its data where a restart keeps them (``Layout``; and save the
    host keys, with ``keep``); say what the hook did at this container's start."""
    where = volume(wanted)
    found = findings.of(host)
    found.boot = report(wanted, probe, where)
    if where.needs_volume and not has_volume(probe, where):
        found.boot = None
        findings.violation(
            f"boot.hook: this pod has no volume at {where.volume} (nothing is mounted there; "
            "a directory there is on the container disk, which a restart wipes), so the hook "
            "cannot work on it: give the pod a volume, or set boot.volume to its mount point",
            "boot.hook",
        )
        return
    pod_id = probe.boot.pod_id if probe.boot else None
    if pod_id is None:
        names = " or ".join(where.identity)
        findings.violation(
            f"boot.hook: this container's environment ({ENVIRON}) has no {names}, so the "
            "hook cannot tell this pod's data from another pod's, and restores nothing at a "
            f"container start: give its container {names}",
            "boot.hook",
        )
    failing = findings.waive(found.violations, wanted.waivers or (), date.today()).failing
    lines, texts = entries(wanted, probe, not failing)
    state = boot_ops.render_state(host.name, pod_id, lines, [text for _, text in texts])
    if len(state.encode("utf-8", "surrogateescape")) > MAX_FILE:
        findings.violation(
            f"boot.hook: the hook's data would hold {len(state)} bytes, more than the "
            f"{MAX_FILE} podstate writes in one command; keep large values and files on the "
            "volume",
            "boot.hook",
        )
        return
    bookkeeping.directories(
        name="Boot hook's data directory", paths={where.data: "700"}, found=probe.paths
    )
    if _keep(wanted):
        boot_ops.keep_host_keys(
            name="Boot: keep the host keys",
            directory=where.data,
            same=probe.boot is not None and probe.boot.keys == "same",
        )
    hook = boot_ops.render_hook(where)
    bookkeeping.owned_file(f"Boot hook {where.hook}", where.hook, hook, probe)
    bookkeeping.owned_file(
        f"Boot hook's data {where.state}", where.state, state, probe, "600", copied=texts
    )
    if not this_start(probe):
        start = probe.container_start
        status = ("not-run\n" if found.boot["outcome"] == "not-run" else "armed\n") + (
            f"container {start}\n" if start else ""
        )
        bookkeeping.owned_file("Boot hook: this container's status", FLAG, status, probe)
