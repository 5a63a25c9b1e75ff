"""A ready virtual environment on the container disk, restorable from a packed snapshot.

``path`` is a symlink to a versioned directory beside it (``.<name>-<fingerprint12>``)
where the venv was built, so scripts' shebangs never change. A run compares the
fingerprint of what is asked (packages, requirements, installer and index options, the
interpreter's version, seed and compile) with the one recorded in the venv: the same,
the interpreter starts and every requested distribution is still installed: nothing to
do. Otherwise the venv is built beside the old one (or unpacked from the snapshot of that
fingerprint, or built when that snapshot turns out bad), verified, and switched in with
one rename. By default the venv has pip (``seed``) and its bytecode compiled
(``compile``). Installer temp, cache and build directories are on local disk or scratch,
never on the volume.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import posixpath
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from podstate import gzcache, settings
from podstate.desired.state import State, Venv
from podstate.facts import made
from podstate.facts.mounts import Mount, mount_of
from podstate.facts.probe import Probe
from podstate.facts.record import Entry, SnapshotEntry, VenvEntry
from podstate.facts.request import Request
from podstate.facts.venv import Python, VenvRequest, normalize
from podstate.operations import venv as venv_ops
from podstate.operations.upload import upload_file
from podstate.roles import disk
from podstate.run import findings
from podstate.run.role import role
from podstate.sizes import format_size

ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}
# A requirement's distribution name, as the installer will record it (PEP 508).
_NAME = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*(.*)")


def _declare(spec: Venv, kind: str | None, old: dict[str, Entry]) -> None:
    """Record what the venv role makes (roles/removal.py): the venv (podstate's link, or
    where nothing is yet) and its snapshot directory."""
    if kind in (None, "symbolic link") or spec.path in old:
        findings.made(VenvEntry(spec.path))
    if spec.snapshot:
        findings.made(SnapshotEntry(spec.snapshot))


def managed_uv(path: str) -> str:
    """Return where podstate keeps its own uv for the venv at ``path``: beside the venvs."""
    return posixpath.join(posixpath.dirname(path), venv_ops.MANAGED, "uv")


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role (nothing when no venv is wanted): the venv
    path (for its filesystem), the scratch paths and ``dirs`` directories its installer's
    directories may be on, and the venv section, with the normalized names of the
    distributions the venv must hold, for the probe to look for."""
    venv = wanted.venv
    if not venv:
        return Request()
    asked = VenvRequest(
        path=venv.path,
        python=venv.python,
        uv=managed_uv(venv.path),
        distributions=" ".join(normalize(name) for name in required(venv)),
        snapshot=venv.snapshot,
    )
    places = (*wanted.scratch_paths, *wanted.dir_paths)
    return Request(paths=(venv.path, *places), venv=asked, made=made.request(wanted))


def distributions(packages: Sequence[str], requirements: str | None) -> list[str]:
    """Return the distribution names the venv must hold, to verify a build.

    Lines with options, paths, URLs without a name, or environment markers (which may
    exclude them on this pod) are skipped.
    """
    lines = list(packages)
    text = re.sub(r"\\\n", " ", requirements or "")
    for line in text.splitlines():
        lines.append(re.sub(r"(^|\s)#.*", "", line).strip())
    names: list[str] = []
    for line in lines:
        match = _NAME.fullmatch(line.strip())
        if not match or ";" in line:
            continue
        rest = match[2]
        if rest and rest[0] not in "<>=!~@(":
            continue
        if match[1] not in names:
            names.append(match[1])
    return names


def required(venv: Venv) -> list[str]:
    """Return the distributions a built venv must hold: those requested, and pip when the
    venv is seeded with it (pip's version is not part of the fingerprint unless pinned)."""
    names = distributions(venv.packages, venv.requirements)
    if venv.seed and "pip" not in {normalize(n) for n in names}:
        names.append("pip")
    return names


def seed_mode(venv: Venv) -> str:
    """Return what the build does about pip (``Venv.seed``): ``check`` when pip is
    requested (it is installed as asked, and must start), ``add`` when the venv is seeded,
    else ``no``."""
    asked = distributions(venv.packages, venv.requirements)
    if "pip" in {normalize(n) for n in asked}:
        return "check"
    return "add" if venv.seed else "no"


def index_args(venv: Venv) -> list[str]:
    """Return the installer's index options (pip and uv spell them alike)."""
    args = ["--index-url", venv.index_url] if venv.index_url else []
    for url in venv.extra_index_urls:
        args += ["--extra-index-url", url]
    for link in venv.find_links:
        args += ["--find-links", link]
    return args + (["--no-index"] if venv.no_index else [])


def requirements_text(venv: Venv) -> str:
    """Return what the installer gets as its requirements file: packages, then the file."""
    packages = "".join(p + "\n" for p in venv.packages)
    return packages + (venv.requirements or "")


def fingerprint(venv: Venv, python: Python) -> tuple[str, str]:
    """Return (fingerprint, record): the hash of what is asked, and the JSON kept in the venv.

    Package order and duplicates do not matter; the interpreter's version does (a new
    patch release gets a new venv), and so does the path (shebangs name it). ``seed`` and
    ``compile`` do, as they change what the venv holds; pip's version does not.
    """
    asked = {
        "path": venv.path,
        "packages": sorted(set(venv.packages)),
        "requirements": venv.requirements or "",
        "installer": venv.installer,
        "index": index_args(venv),
        "python": {"executable": python.executable, "version": python.version},
        "seed": venv.seed,
        "compile": venv.compile,
    }
    canonical = json.dumps(asked, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    # The record travels in the build's command: it names the packages and requirements by
    # the sha256 of the file the installer gets, whose text travels as an upload of its own.
    text = requirements_text(venv).encode("utf-8", "surrogateescape")
    shown = {k: v for k, v in asked.items() if k not in ("packages", "requirements")}
    shown["requirements_sha256"] = hashlib.sha256(text).hexdigest()
    record = json.dumps({"fingerprint": digest, "asked": shown}, indent=1, sort_keys=True)
    return digest, record + "\n"


def recorded(record: str | None) -> str | None:
    """Return the fingerprint in a venv's record (None if absent or unreadable)."""
    try:
        value = json.loads(record or "")["fingerprint"]
    except (ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None


def describe(venv: Venv, python: Python, environment: dict[str, str]) -> venv_ops.Venv:
    """Return the venv operations' description of ``venv`` (the desired state's) on a pod
    whose interpreter is ``python`` (the probe's), built with ``environment``."""
    digest, record = fingerprint(venv, python)
    return venv_ops.Venv(
        path=venv.path,
        fingerprint=digest,
        record=record,
        python=python.executable,
        installer=venv.installer,
        requirements=requirements_text(venv),
        distributions=required(venv),
        index_args=index_args(venv),
        environment=environment,
        seed=seed_mode(venv),
        compile=venv.compile,
    )


def _local(mount: Mount | None) -> bool:
    """True unless ``mount`` is a network filesystem (where installs crawl)."""
    return mount is None or not mount.is_network


def work_environment(wanted: State, probe: Probe, venv_parent: str) -> dict[str, str]:
    """Return TMPDIR and the pip/uv cache directories for the install, all on local storage.

    The ``dirs`` values when they are local, else directories under the first local scratch
    path, else under /tmp. uv links from its cache by hard link when cache and venv share
    a filesystem, else it copies.
    """
    dirs = wanted.dirs or {}
    fallback = "/tmp"
    for path in wanted.scratch_paths:
        if _local(probe.paths[path].mount):
            fallback = path
            break
    defaults = {"TMPDIR": fallback, "PIP_CACHE_DIR": "", "UV_CACHE_DIR": ""}
    env: dict[str, str] = {}
    for name, suffix in (("TMPDIR", ""), ("PIP_CACHE_DIR", "pip"), ("UV_CACHE_DIR", "uv")):
        given = dirs.get(name)
        if given and _local(probe.paths[given].mount):
            env[name] = given
        else:
            env[name] = defaults[name] or posixpath.join(fallback, ".podstate-cache", suffix)
    mounts = probe.mounts
    info = probe.paths.get(env["UV_CACHE_DIR"])
    cache = info.real if info else env["UV_CACHE_DIR"]
    same = mount_of(cache, mounts) == mount_of(venv_parent, mounts)
    env["UV_LINK_MODE"] = "hardlink" if same else "copy"
    return env


def _uploadable(arch: str | None) -> bool:
    """True when the control machine's own uv binary runs on a pod of ``arch``."""
    here = platform.machine().lower()
    return sys.platform.startswith("linux") and ARCH_ALIASES.get(here, here) == arch


@role("Venv", reads, when=lambda wanted: wanted.venv)
def apply(wanted: State, probe: Probe) -> None:
    """Converge ``venv``: build, restore or leave it; keep its snapshot; report what cannot be."""
    spec = wanted.venv
    if spec is None:  # when= says so
        return
    path, seen = spec.path, probe.venv
    if seen is None:
        raise ValueError("the probe did not read the venv")
    info = probe.paths[path]
    mount = info.mount
    _declare(spec, info.kind, made.previous(probe.made))
    if mount is not None and mount.is_network:
        findings.violation(
            f"venv.path {path} is on the network filesystem {mount.fstype} ({mount.source} at "
            f"{mount.target}): a venv there takes minutes to install and seconds per import; "
            "choose a path on the container disk such as /opt/venv (venv.snapshot keeps a "
            "packed copy on the volume for restores)",
            "venv.path",
        )
        return
    if seen.kind not in (None, "link") or (
        seen.kind == "link" and not venv_ops.is_version(path, seen.target)
    ):
        what = "a symlink podstate did not make" if seen.kind == "link" else seen.kind
        findings.violation(
            f"venv.path {path} is {what}, not a podstate venv: podstate will not replace it; "
            "move it away or choose another venv.path",
            "venv.path",
        )
        return
    python = seen.python
    if python is None:
        findings.violation(
            f"venv.python {spec.python} is not on the pod: install it, or point venv.python "
            "at an interpreter the pod has (such as /usr/bin/python3)",
            "venv.python",
        )
        return
    if spec.installer == "pip" and not python.ensurepip:
        findings.violation(
            f"venv.installer pip needs the venv module with ensurepip in {python.executable} "
            "(Debian/Ubuntu: apt-get install python3-venv); or use installer uv",
            "venv.installer",
        )
        return

    want = describe(spec, python, work_environment(wanted, probe, posixpath.dirname(info.real)))
    digest = want.fingerprint
    second = dataclasses.replace(want, alternate=True)
    missing = seen.missing or ()
    live = seen.target in (want.version, second.version)
    ready = seen.works and recorded(seen.record) == digest and live and not missing
    if not ready and seen.free is not None and seen.free < disk.MIN_FREE:
        findings.violation(
            f"venv.path {path} is on a full filesystem "
            f"({mount.target if mount else posixpath.dirname(path)}): "
            f"{format_size(seen.free)} free; podstate changed nothing there: free space, "
            "or choose a venv.path on a disk with room",
            "venv.free",
        )
        return
    # A venv in use is never rebuilt in place: one broken at the fingerprint's first name
    # is rebuilt at its second, beside it, and the other way round.
    if seen.target == (want.version if not ready else second.version):
        want = second
    snapshot = seen.snapshot
    restore = None
    if (
        not ready
        and not want.alternate
        and spec.snapshot
        and snapshot
        and snapshot.fingerprint == digest
    ):
        if snapshot.compressor == "gzip" or seen.zstd:
            archive = posixpath.join(spec.snapshot, snapshot.archive)
            restore = dataclasses.replace(snapshot, archive=archive)

    uv = seen.uv or (managed_uv(path) if seen.managed_uv else None)
    fallback = None
    if not ready and want.installer == "uv" and uv is None:
        uv = managed_uv(path)
        upload = _uv_upload(probe.arch)
        if restore:  # uv only if the snapshot turns out bad: the venv operation then gets it
            fallback = venv_ops.Fallback(uv=uv, upload=upload, pip_uv=upload is None)
        elif upload:
            upload_file(
                name=f"Upload uv to {uv} (the pod has none)",
                src=upload[0],
                dest=uv,
                gzipped=upload[1],
                _timeout=settings.VENV_TIMEOUT,
            )
        else:
            venv_ops.pip_install_uv(
                name=f"Install uv with pip at {uv} (the pod has none, and is {probe.arch})",
                want=want,
                dest=uv,
                _timeout=settings.VENV_TIMEOUT,
            )
    if restore:
        fallback = dataclasses.replace(
            fallback or venv_ops.Fallback(uv=uv if want.installer == "uv" else None),
            snapshot=spec.snapshot,
            zstd=seen.zstd,
        )

    if ready:
        how = "ready"
    elif restore:
        how = f"restore from snapshot {restore.archive}"
    elif missing:
        how = f"{', '.join(missing)} missing: rebuild with {want.installer} beside it"
    else:
        how = f"build with {want.installer}"
    venv_ops.venv(
        name=f"Venv {path}: {how}",
        want=want,
        ready=ready,
        uv=uv,
        restore=restore,
        fallback=fallback,
        _timeout=settings.VENV_TIMEOUT,
    )
    if spec.snapshot:
        venv_ops.venv_snapshot(
            name=f"Venv snapshot in {spec.snapshot}",
            want=want,
            directory=spec.snapshot,
            current=snapshot.fingerprint if snapshot else None,
            zstd=seen.zstd,
            _timeout=settings.VENV_TIMEOUT,
        )


def _uv_upload(arch: str | None) -> tuple[str, bool] | None:
    """Return the control machine's uv to upload to a pod of ``arch`` (the file, and whether
    it is a gzip copy), or None when it does not run there (pip then installs uv)."""
    if not _uploadable(arch):
        return None
    from uv import find_uv_bin

    binary = Path(find_uv_bin())
    packed = gzcache.gzipped(binary)
    return str(packed or binary), packed is not None
