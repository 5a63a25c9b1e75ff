"""Starting and stopping a whole sandbox: ``up``, ``down`` and ``status``.

``up()`` starts the storage sshd, the RunPod API and the pods, and writes a pods file
(``pods_file()``) for the rest of podstate and ``pods.json`` with each pod's shape,
processes and start time; ``down()`` ends them all and removes the state directory, even
one already deleted. ``start_pod`` and ``finish_start`` start one pod's container, for
``up`` and for ``container.restart``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podstate.jsonfile import write_json
from podstate.procfs import unescape
from podstate.sandbox import cgroups, images
from podstate.sandbox.api import API_KEY_FILE, start_api
from podstate.sandbox.prepare import FILES, prepare_pod, software_mounts
from podstate.sandbox.processes import (
    alive,
    host_pid,
    init_of,
    marked,
    proc_start,
    spawn,
    stop,
)
from podstate.sandbox.shapes import VAST_SHAPES, Shape, shape_for, shape_of
from podstate.sandbox.ssh import (
    SSHD,
    free_ports,
    keygen,
    public_key,
    release_ports,
    wait_for_banners,
    wait_for_start_script,
)
from podstate.sandbox.state import (
    SandboxError,
    load_pods,
    pod_state_dir,
    pods_file,
    pods_yaml,
    start_time,
    state_dir,
)
from podstate.sandbox.storage import start_storage

# Ports below Linux's ephemeral range (32768-60999), where no outgoing connection (the
# tests' own SSH clients, sshfs) can take a port between the check that it is free and the
# pod's sshd binding it. A sandbox's ports start at one of 40 places by its state directory,
# so that two sandboxes seldom look through the same ones (a port one holds, the other
# skips: ``free_ports``).
DEFAULT_BASE_PORT = 20001
# Each pod's container disk: the tmpfs holding its root filesystem's writable layer (tmpfs
# only takes memory for what is written).
DISK = "4G"

ROOT_MESSAGE = "sandbox pods need root (they use Linux namespaces and mounts); run as root"
TOOLS_MESSAGE = "install openssh-server and sshfs (apt-get install openssh-server sshfs)"
ALREADY_UP_MESSAGE = "sandbox already up; run `podstate sandbox down` first"


@dataclass
class PodStatus:
    """One sandbox pod as ``status()`` sees it."""

    name: str
    port: int
    pid: int  # the container's main process (its start script, then its sleep infinity)
    sshd_pid: int | None  # the pod's sshd, which the start script started
    running: bool  # its container is alive
    shape: Shape  # str(shape) is a one-line summary


def up(
    pods: int = 4,
    base_port: int | None = None,
    disk: str = DISK,
    storage_route: Callable[[int], int] | None = None,
    nvidia_smi_delay: float = 0,
    vast: int = 0,
    image: str = images.HOST,
) -> Path:
    """Start ``pods`` sandbox pods and ``vast`` sandbox Vast instances (``vast-1``, ...,
    shaped by ``shapes.VAST_SHAPES``, listed by the sandbox's Vast API) and return the pods
    file written for them.

    Ports are the first free ones from ``base_port`` on; by default a base between 20001
    and 31701 derived from the state directory (see ``DEFAULT_BASE_PORT``); they are held
    for this sandbox until ``down`` (``free_ports``), so that two sandboxes (a demo and a
    test run, test files run in parallel) never take the same port. ``disk`` is each pod's
    container disk size, as mount(8) takes tmpfs sizes ("4G", "512M"). Returns once every
    pod's sshd answers with its SSH banner; on any failure, stops what it started and
    raises SandboxError. ``storage_route`` maps the
    storage sshd's port to the port the pods' sshfs connects to instead (a proxy that adds
    network latency, say; its caller runs it). ``nvidia_smi_delay`` is how many seconds each
    call of the pods' nvidia-smi takes (as on a multi-GPU host without persistence mode,
    where NVML's start takes seconds); 0, the default, answers at once. ``image`` is the
    pods' root filesystem (``images.names()``): the host's own, or a Debian release built
    with debootstrap the first time it is asked for (about a minute) and cached for the
    machine. Refused while the
    sandbox is up, or while processes of one whose state directory was deleted still run.

    The pods file's known_hosts (``known_hosts`` in the state directory) holds the host keys
    the pods have now, as a user's ``~/.ssh/known_hosts`` would after a first connection;
    ``restart`` leaves it alone, so a restarted pod's new key is refused through the pods
    file, as it is on RunPod.
    """
    if pods < 0 or vast < 0 or pods + vast < 1:
        raise SandboxError("a sandbox needs at least one pod")
    if not re.fullmatch(r"[1-9]\d*[kKmMgG]?", disk):
        raise SandboxError(f"disk size {disk!r} is not a size like 4G or 512M")
    if not 0 <= nvidia_smi_delay <= 60:
        raise SandboxError(f"nvidia-smi delay {nvidia_smi_delay!r} is not 0 to 60 seconds")
    _preflight()
    root = state_dir()
    if (root / "sandbox.json").exists() or marked(root):
        raise SandboxError(ALREADY_UP_MESSAGE)
    lower = images.root_of(image)
    try:
        base = base_port or DEFAULT_BASE_PORT + zlib.crc32(str(root).encode()) % 40 * 300
        return _up(root, pods, base, disk, storage_route, nvidia_smi_delay, vast, lower)
    except BaseException as error:
        try:
            down()
        except (SandboxError, OSError):
            pass
        if isinstance(error, (OSError, subprocess.SubprocessError)):
            raise SandboxError(f"sandbox did not start: {error}") from error
        raise


def down() -> None:
    """Stop every sandbox process, unmount what is left and remove the sandbox state and the
    pods' cgroups (those its processes were in, too: its state directory may be gone).

    Kills sshfs first, then each pod's sshd, the storage sshd and the API server, then
    anything else left in their namespaces. Finds them by their mark (``processes.stop``),
    so a sandbox whose state directory was deleted is stopped all the same, and another
    sandbox's pods are never touched. Safe to call when nothing is up, and from another
    process than up().
    """
    root = state_dir()
    held = cgroups.held_by(pid for pid, _ in marked(root))  # named by its processes too
    stop(root)
    release_ports(root)
    for pod_dir in (root / "pods").glob("*/"):
        cgroups.remove(pod_dir)
    cgroups.remove_all(held)

    for mount_point in _host_mounts_under(root):
        subprocess.run(["umount", "-l", mount_point], capture_output=True)
    left = _host_mounts_under(root)
    if left:
        raise SandboxError(f"cannot unmount {left[0]}; unmount it and run down again")
    if not root.is_dir():
        return

    for name in ("pods", "storage", "storaged", "hostkeys"):
        shutil.rmtree(root / name, ignore_errors=True)
    for name in (
        "pods.yaml", "pods.json", "known_hosts", "id_ed25519", "id_ed25519.pub",
        API_KEY_FILE, "api.log", "vast_api_key", "vast_faults.json",
    ):  # fmt: skip
        (root / name).unlink(missing_ok=True)
    (root / "sandbox.json").unlink(missing_ok=True)
    try:
        root.rmdir()
    except OSError:
        pass


def status() -> list[PodStatus]:
    """Return every sandbox pod with its port, its container's and its sshd's pids, whether
    it runs, and its shape."""
    result = []
    for name, pod in load_pods().items():
        result.append(
            PodStatus(
                name=name,
                port=pod["port"],
                pid=pod["pid"],
                sshd_pid=pod.get("sshd_pid"),
                running=alive(pod["pid"], pod.get("pid_start")),
                shape=shape_of(pod),
            )
        )
    return result


# --- starting ---------------------------------------------------------------------------


def _preflight() -> None:
    if os.geteuid() != 0:
        raise SandboxError(ROOT_MESSAGE)
    if not os.access(SSHD, os.X_OK) or not all(
        shutil.which(tool) for tool in ("ssh", "ssh-keygen", "sshfs")
    ):
        raise SandboxError(TOOLS_MESSAGE)
    missing = [
        tool
        for tool in ("unshare", "nsenter", "setpriv", "pivot_root", "mountpoint")
        if not shutil.which(tool)
    ]
    if missing:
        raise SandboxError(f"{missing[0]} is missing; install util-linux")
    if not Path("/dev/fuse").exists():
        raise SandboxError("/dev/fuse is missing; sshfs pods need FUSE (modprobe fuse)")
    probe = subprocess.run(
        ["unshare", "--mount", "--uts", "--pid", "--fork", "--mount-proc", "--", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        detail = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise SandboxError(f"Linux mount, UTS and pid namespaces do not work here ({detail})")


def _up(
    root: Path,
    count: int,
    base_port: int,
    disk: str,
    storage_route: Callable[[int], int] | None = None,
    nvidia_smi_delay: float = 0,
    vast: int = 0,
    image: Path = Path("/"),
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for stale in ("pods", "storage", "storaged"):  # left by a down() that was cut short
        if not _host_mounts_under(root / stale):
            shutil.rmtree(root / stale, ignore_errors=True)
    meta: dict[str, Any] = {"disk": disk, "storage": None, "api": None, "image": str(image)}
    write_json(root / "sandbox.json", meta, sort_keys=True)

    ports = free_ports(count + vast + 1, base_port, root)
    names = [f"pod-{i}" for i in range(1, count + 1)] + [f"vast-{i}" for i in range(1, vast + 1)]
    storaged = root / "storaged"
    storaged.mkdir()
    (root / "storage").mkdir()
    keygen([root / "id_ed25519", storaged / "host_key", storaged / "client_key"])

    storage_port = ports[-1]
    storage_pub = public_key(storaged / "host_key.pub")
    (storaged / "known_hosts").write_text(f"[127.0.0.1]:{storage_port} {storage_pub}\n")
    meta["storage"] = start_storage(root, storage_port)
    write_json(root / "sandbox.json", meta, sort_keys=True)
    wait_for_banners({"storage sshd": (storage_port, meta["storage"], storaged / "sshd.log")})
    if storage_route is not None:  # sshfs goes through another port; its host key is the same
        storage_port = storage_route(storage_port)
        with open(storaged / "known_hosts", "a") as known:
            known.write(f"[127.0.0.1]:{storage_port} {storage_pub}\n")

    client_pub = public_key(root / "id_ed25519.pub")
    # a built image is one directory: no host mounts to overlay beside it
    mounts = software_mounts(root) if image == Path("/") else []
    submounts = "".join(point + "\n" for point in mounts)
    records: dict[str, dict[str, Any]] = {}
    for number, (name, port) in enumerate(zip(names, ports, strict=False), start=1):
        vast_number = number - count if number > count else 0
        shape = (
            VAST_SHAPES[(vast_number - 1) % len(VAST_SHAPES)] if vast_number else shape_for(number)
        )
        pod_dir = pod_state_dir(root, name)
        prepare_pod(
            root, pod_dir, name, port, shape, storage_port, client_pub, disk, nvidia_smi_delay,
            image,
        )  # fmt: skip
        (pod_dir / "submounts").write_text(submounts)
        records[name] = _pod_record(name, number, port, shape, pod_dir)
        if vast_number:
            records[name]["vast"] = vast_number
    meta["api"] = start_api(root)
    write_json(root / "sandbox.json", meta, sort_keys=True)
    for name, record in records.items():
        record.update(start_pod(pod_state_dir(root, name)))
        record["created_at"] = record["started_at"]
        write_json(root / "pods.json", records, sort_keys=True)

    wait_for_banners(
        {
            name: (rec["port"], rec, pod_state_dir(root, name) / "bootstrap.log")
            for name, rec in records.items()
        }
    )
    known_hosts = "".join(finish_start(root, name, record) for name, record in records.items())
    write_json(root / "pods.json", records, sort_keys=True)
    (root / "known_hosts").write_text(known_hosts)
    pods_file().write_text(pods_yaml(root, records))
    return pods_file()


def _pod_record(name: str, number: int, port: int, shape: Shape, pod_dir: Path) -> dict[str, Any]:
    return {
        "number": number,
        "port": port,
        "cloud": shape.cloud,
        "gpus": shape.gpus,
        "gpu_name": shape.gpu_name,
        "nvlink": shape.nvlink,
        "link": shape.link,
        "shm": shape.shm,
        "shm_bytes": shape.shm_bytes,
        "workspace": shape.workspace,
        "privileged": shape.privileged,
        "pod_id": (pod_dir / "pod_id").read_text().strip(),
        "dir": str(pod_dir),
        "pid": None,
        "pid_start": None,
        "sshd_pid": None,
        "sshd_pid_start": None,
    }


def start_pod(pod_dir: Path, last_start: str | None = None) -> dict[str, Any]:
    """Start a pod's bootstrap (which becomes its container's main process); return its pid
    record and
    ``started_at``, its start time (later than ``last_start``, the pod's previous one)."""
    command = ["/bin/sh", str(FILES / "pod-bootstrap.sh")]
    started_at = start_time(last_start)
    cgroups.make(pod_dir)
    record = spawn(["--mount", "--uts"], command, pod_dir, pod_dir / "bootstrap.log")
    return {**record, "started_at": started_at}


def finish_start(root: Path, name: str, record: dict[str, Any]) -> str:
    """Wait for the start script of a pod whose sshd answers to finish, complete its record
    (its sshd, its sshfs) and write its own known_hosts with the host key its start made;
    return that known_hosts line."""
    pod_dir = pod_state_dir(root, name)
    # the pids the pod's start wrote are its own namespace's: the sandbox signals and traces
    # its processes by their pids outside
    inner = wait_for_start_script(name, record, pod_dir)
    record.update(init_of(record["pid"]))
    sshd = host_pid(record["init_pid"], inner)
    record["sshd_pid"], record["sshd_pid_start"] = sshd, proc_start(sshd)
    if record["workspace"] == "sshfs":
        pid = int((pod_dir / "sshfs.pid").read_text())
        record["sshfs_pid"], record["sshfs_pid_start"] = pid, proc_start(pid)
    line = f"[127.0.0.1]:{record['port']} {public_key(pod_dir / 'host_key.pub')}\n"
    (pod_dir / "known_hosts").write_text(line)
    return line


def _host_mounts_under(path: Path) -> list[str]:
    """Return this namespace's mount points at or under path, deepest first."""
    result = []
    prefix = str(path).rstrip("/") + "/"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = unescape(line.split()[4])
        if point == str(path) or point.startswith(prefix):
            result.append(point)
    return sorted(result, key=len, reverse=True)
