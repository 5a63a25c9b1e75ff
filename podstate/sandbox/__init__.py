"""Sandbox pods: real OpenSSH servers on 127.0.0.1, shaped like RunPod pods.

Each pod is an ``sshd -D`` in its own Linux mount and UTS namespace, like a RunPod pod is
a Docker container whose start script runs sshd as root with no systemd:

* hostname is the pod name; its root filesystem is its own, like a container's: an
  overlayfs over the host's ``/`` whose writable layer is a tmpfs of ``disk`` bytes (the
  container disk, ``df /``), so whatever a pod writes (``/scratch``, ``/etc``, ...) stays
  in that pod and vanishes with it; ``/root`` and ``/tmp`` start empty but for what RunPod
  puts there; ``/run`` and ``/dev/shm`` are the pod's own tmpfs;
* ``/workspace`` is a local directory or, like a network volume, an sshfs mount served by
  one storage sshd;
* ``/root/.bashrc`` ends with ``source /etc/rp_environment``, after Debian's "not
  interactive, return" guard, as on RunPod, so non-interactive SSH commands miss it;
* ``/usr/local/bin/nvidia-smi`` is a stand-in answering from the pod's GPU layout;
* every pod but the privileged one runs with Docker's default capability set, so no
  CAP_SYS_ADMIN and no mounts from inside.

Pod shapes cycle through ``SHAPES``. ``up()`` writes a pods file (``pods_file()``) for the
rest of podstate, and ``pods.json`` with each pod's shape, processes and start time for
tests; it also starts the sandbox's RunPod API (``api_env()`` says where, with its key),
which lists the same pods as RunPod's ``GET /v2/pods`` would.

``restart()`` does to a pod what RunPod does to a container at a stop and start, a restart,
a migration or a spot interruption: the container disk is wiped, the volume kept, the
start script runs again (a new host key, /etc/rp_environment, its ~/.bashrc line, PUBLIC_KEY
in authorized_keys), on the same address and port, with a new ``startedAt``. A pod may
have a start command (``set_start_command``), run at every container start before the
image's start script, as RunPod runs the template's container start command.

This module is the sandbox's interface and starts and stops it; the parts live beside it:
``sandbox_shapes`` (what pods look like), ``sandbox_prepare`` (each pod's files before it
starts), ``sandbox_processes`` (processes in namespaces: start, check, end),
``sandbox_ssh`` (keys, sshd options, ports, banners), ``sandbox_storage`` (the sshd behind
the sshfs volumes), ``sandbox_api`` (the RunPod API) and ``sandbox_state`` (the state
directory and its records).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podstate.jsonfile import write_json
from podstate.procfs import unescape
from podstate.sandbox.api import API_KEY_FILE, start_api
from podstate.sandbox.prepare import FILES, prepare_pod, software_mounts
from podstate.sandbox.processes import POD_PATH, alive, namespaces_of, proc_start, spawn, stop
from podstate.sandbox.shapes import (
    NVIDIA_SMI_CALLS,
    SHAPES,
    Shape,
    gpu_fault_command,
    shape_for,
)
from podstate.sandbox.ssh import SSHD, free_ports, keygen, public_key, wait_for_banners
from podstate.sandbox.state import (
    SandboxError,
    load_pods,
    pod_state_dir,
    pods_file,
    pods_json,
    pods_yaml,
    read_json,
    save_pod,
    start_time,
    state_dir,
)
from podstate.sandbox.storage import start_storage

_RESTARTING = threading.Lock()

__all__ = [
    "SHAPES",
    "SESSION",
    "SSHD",
    "PodStatus",
    "SandboxError",
    "Shape",
    "api_env",
    "commands_served",
    "down",
    "nvidia_smi_calls",
    "pod_exec",
    "pods_file",
    "pods_json",
    "programs_started",
    "restart",
    "set_start_command",
    "shape_for",
    "ssh",
    "ssh_command",
    "state_dir",
    "status",
    "stop_pod",
    "up",
]

# Ports below Linux's ephemeral range (32768-60999), where no outgoing connection (the
# tests' own SSH clients, sshfs) can take a port between the check that it is free and the
# pod's sshd binding it. A sandbox's ports start at one of 40 places by its state directory,
# so that two sandboxes (two checkouts' tests) rarely reach for the same ones.
DEFAULT_BASE_PORT = 20001
# Each pod's container disk: the tmpfs holding its root filesystem's writable layer (tmpfs
# only takes memory for what is written).
DISK = "4G"
_POD_ENV = {
    "PATH": POD_PATH,
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
}

ROOT_MESSAGE = "sandbox pods need root (they use Linux namespaces and mounts); run as root"
TOOLS_MESSAGE = "install openssh-server and sshfs (apt-get install openssh-server sshfs)"
ALREADY_UP_MESSAGE = "sandbox already up; run `podstate sandbox down` first"
# What a pod's sshd logs for every exec request (a remote command).
SESSION = "Starting session: command for "


@dataclass
class PodStatus:
    """One sandbox pod as ``status()`` sees it."""

    name: str
    port: int
    pid: int  # the pod's sshd
    running: bool  # its sshd is alive
    shape: Shape  # str(shape) is a one-line summary


def ssh_command(name: str, root: Path | None = None) -> list[str]:
    """Return the ``ssh`` argv (without the remote command) that reaches sandbox pod ``name``.

    As a user would: the sandbox's key, strict checking against the pod's current host key
    (its own known_hosts, renewed at each start: a restarted pod is reached with its new
    key), no agent or config file of the caller's, no password prompt. ``root`` is the
    sandbox's state directory (default: ``state_dir()``).
    """
    root = root or state_dir()
    pod = read_json(root / "pods.json").get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    return [
        "ssh", "-F", "/dev/null", "-i", str(root / "id_ed25519"),
        "-o", f"UserKnownHostsFile={pod_state_dir(root, name) / 'known_hosts'}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=10", "-p", str(pod["port"]), "root@127.0.0.1",
    ]  # fmt: skip


def ssh(
    name: str, command: str, data: bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run ``command`` on sandbox pod ``name`` as ``ssh pod CMD`` does, ``data`` on its stdin.

    Returns the completed process with stdout and stderr as text (undecodable bytes
    replaced), whatever its exit status.
    """
    result = subprocess.run(
        [*ssh_command(name), command], input=data, capture_output=True, timeout=timeout
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode(errors="replace"),
        result.stderr.decode(errors="replace"),
    )


def up(
    pods: int = 4,
    base_port: int | None = None,
    disk: str = DISK,
    storage_route: Callable[[int], int] | None = None,
    nvidia_smi_delay: float = 0,
) -> Path:
    """Start ``pods`` sandbox pods and return the pods file written for them.

    Ports are the first free ones from ``base_port`` on; by default a base between 20001
    and 31701 derived from the state directory (see ``DEFAULT_BASE_PORT``), so that two
    sandboxes (a demo and a test run, say) do not race for the same ports, and one sandbox
    keeps its ports. ``disk`` is each pod's container disk size, as mount(8) takes tmpfs
    sizes ("4G", "512M"). Returns once every pod's sshd answers with its SSH banner; on any
    failure, stops what it started and raises SandboxError. ``storage_route`` maps the
    storage sshd's port to the port the pods' sshfs connects to instead (a proxy that adds
    network latency, say; its caller runs it). ``nvidia_smi_delay`` is how many seconds each
    call of the pods' nvidia-smi takes (as on a multi-GPU host without persistence mode,
    where NVML's start takes seconds); 0, the default, answers at once.

    The pods file's known_hosts (``known_hosts`` in the state directory) holds the host keys
    the pods have now, as a user's ``~/.ssh/known_hosts`` would after a first connection;
    ``restart`` leaves it alone, so a restarted pod's new key is refused through the pods
    file, as it is on RunPod.
    """
    if pods < 1:
        raise SandboxError("a sandbox needs at least one pod")
    if not re.fullmatch(r"[1-9]\d*[kKmMgG]?", disk):
        raise SandboxError(f"disk size {disk!r} is not a size like 4G or 512M")
    if not 0 <= nvidia_smi_delay <= 60:
        raise SandboxError(f"nvidia-smi delay {nvidia_smi_delay!r} is not 0 to 60 seconds")
    _preflight()
    root = state_dir()
    if (root / "sandbox.json").exists():
        raise SandboxError(ALREADY_UP_MESSAGE)
    try:
        base = base_port or DEFAULT_BASE_PORT + zlib.crc32(str(root).encode()) % 40 * 300
        return _up(root, pods, base, disk, storage_route, nvidia_smi_delay)
    except BaseException as error:
        try:
            down()
        except (SandboxError, OSError):
            pass
        if isinstance(error, (OSError, subprocess.SubprocessError)):
            raise SandboxError(f"sandbox did not start: {error}") from error
        raise


def down() -> None:
    """Stop every sandbox process, unmount what is left and remove the sandbox state.

    Kills sshfs first, then each pod's sshd and anything else left in its namespaces, then
    the storage sshd and the API server. Safe to call when nothing is up, and from another
    process than up().
    """
    root = state_dir()
    if not root.is_dir():
        return
    meta = read_json(root / "sandbox.json")
    stop(read_json(root / "pods.json").values(), [meta.get("storage") or {}, meta.get("api") or {}])

    for mount_point in _host_mounts_under(root):
        subprocess.run(["umount", "-l", mount_point], capture_output=True)
    left = _host_mounts_under(root)
    if left:
        raise SandboxError(f"cannot unmount {left[0]}; unmount it and run down again")

    for name in ("pods", "storage", "storaged", "hostkeys"):
        shutil.rmtree(root / name, ignore_errors=True)
    for name in (
        "pods.yaml", "pods.json", "known_hosts", "id_ed25519", "id_ed25519.pub",
        API_KEY_FILE, "api.log",
    ):  # fmt: skip
        (root / name).unlink(missing_ok=True)
    (root / "sandbox.json").unlink(missing_ok=True)
    try:
        root.rmdir()
    except OSError:
        pass


def status() -> list[PodStatus]:
    """Return every sandbox pod with its port, sshd pid, whether it runs, and its shape."""
    result = []
    for name, pod in load_pods().items():
        result.append(
            PodStatus(
                name=name,
                port=pod["port"],
                pid=pod["pid"],
                running=alive(pod["pid"], pod.get("pid_start")),
                shape=shape_for(pod["number"]),
            )
        )
    return result


def gpu_fault(name: str, fault: str, index: int = 0) -> None:
    """Make running pod ``name`` a bad GPU host: ``fault`` is a name of GPU_FAULTS (thermal,
    ecc, pcie, old-driver, nvml-mismatch, nvml-unknown, unknown-field) or ``no-gpus``;
    ``index`` the GPU it spoils."""
    pod_exec(name, gpu_fault_command(fault, index))


def pod_exec(
    name: str, command: str, check: bool = True, timeout: float | None = 120
) -> subprocess.CompletedProcess:
    """Run ``bash -c command`` inside a pod (its namespaces and root), bypassing SSH.

    stdout and stderr come back as text. With check, a non-zero exit raises
    subprocess.CalledProcessError (which carries the output), like subprocess.run.
    """
    pod = load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    if not alive(pod["pid"], pod.get("pid_start")):
        raise SandboxError(f"sandbox pod {name} is not running")
    return subprocess.run(
        ["nsenter", "-t", str(pod["pid"]), "-m", "-u", "-r", "-w", "--", "bash", "-c", command],
        capture_output=True,
        text=True,
        check=check,
        env=_POD_ENV,
        cwd="/",
        timeout=timeout,
    )


def nvidia_smi_calls(name: str) -> list[str]:
    """Return the arguments of every call of pod ``name``'s nvidia-smi since its container
    started, one string each, in order (a restart starts the list again)."""
    result = pod_exec(name, f"cat {NVIDIA_SMI_CALLS} 2>/dev/null || true")
    return result.stdout.splitlines()


@contextlib.contextmanager
def programs_started(name: str) -> Iterator[list[str]]:
    """Yield a list that, once the block has run, holds every program the processes of pod
    ``name``'s sshd started during it (the path each successful execve ran), in start order.

    For counting what a command run over SSH costs the pod: the connection's own sshd
    (OpenSSH re-executes itself for each connection), the login shell for each remote
    command, and all they start. Needs strace (apt-get install strace), which is attached to
    the sshd before the block runs and detached after.
    """
    pod = load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    if not shutil.which("strace"):
        raise SandboxError("strace is missing; install it (apt-get install strace)")
    with tempfile.TemporaryDirectory(prefix="podstate-trace-") as tmp:
        tracer = subprocess.Popen(
            ["strace", "-f", "-ff", "-ttt", "-e", "trace=execve", "-e", "signal=none",
             "-o", f"{tmp}/t", "-p", str(pod["pid"])],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        started: list[str] = []
        try:
            line = tracer.stderr.readline() if tracer.stderr else ""
            if "attached" not in line:
                raise SandboxError(f"strace could not attach to {name}'s sshd: {line.strip()}")
            yield started
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.communicate(timeout=30)
        execs = []
        for trace in Path(tmp).glob("t.*"):
            execs += re.findall(r'^(\d+\.\d+) execve\("([^"]*)".*= 0$', trace.read_text(), re.M)
        started += [path for _, path in sorted(execs, key=lambda e: float(e[0]))]


def stop_pod(name: str) -> None:
    """Stop a pod like a stopped container: its sshd, its sshfs and anything left inside.

    The pod becomes unreachable; status() reports it not running; down() still cleans up.
    """
    pod = load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    stop([pod], [])


def commands_served(root: Path | None = None) -> dict[str, int]:
    """Return, per pod, the exec requests (remote commands) its sshd has served so far.

    Counted from each pod's sshd log (LogLevel VERBOSE writes one "Starting session:
    command for" line per exec request). The log is in the state directory, not in the
    pod, and every start of the pod appends to it, so the count goes on across restarts
    (it never starts from zero again): take the difference of two readings. ``root`` is
    the state directory (default: ``state_dir()``).
    """
    root = root or state_dir()
    return {
        log.parent.name: log.read_text(errors="replace").count(SESSION)
        for log in sorted((root / "pods").glob("*/sshd.log"))
    }


def restart(name: str) -> None:
    """Restart sandbox pod ``name`` as RunPod re-creates a container at a stop and start, a
    restart, a migration or a spot interruption; return once its new sshd answers.

    Every process of the pod ends (its sshd, its sessions, its sshfs, whatever else runs in
    it) and its namespaces go with them, so its container disk (everything outside the
    volume: /root, /etc, /scratch, ...) is gone. Then it starts again from its image, on
    the same address and port: its start command, if it has one (``set_start_command``),
    then RunPod's start script (PUBLIC_KEY into authorized_keys, a new host key, unless the
    start command put one back, /etc/rp_environment, its ~/.bashrc line), then sshd. The
    volume (/workspace) is kept as it is. pods.json gets the new processes and
    ``started_at`` (RunPod's ``startedAt``: the restart's time, which the sandbox API
    reports); the pod's own known_hosts (``ssh_command``) gets the new key, the pods
    file's does not. A stopped pod (``stop_pod``) is started again. Raises SandboxError
    when the pod does not start (a failing start command, say), with the log's last line.
    """
    root = state_dir()
    pod = load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    pod_dir = pod_state_dir(root, name)
    # One restart at a time: a pod stopped while another starts could have its processes
    # swept by namespace numbers the kernel has just given to the other.
    with _RESTARTING:
        pod = load_pods()[name]
        stop([pod], [])
        record = {k: v for k, v in pod.items() if not k.startswith(("sshfs_", "mnt_", "uts_"))}
        record.update(_start_pod(pod_dir, pod.get("started_at")))
        save_pod(root, name, record)
        wait_for_banners({name: (record["port"], record, pod_dir / "bootstrap.log")})
        _finish_start(root, name, record)
        save_pod(root, name, record)


def set_start_command(name: str, command: str | None) -> None:
    """Give sandbox pod ``name`` a start command (sh script text), or none (``None``).

    The pod's bootstrap runs it at every container start from the next one on (``restart``),
    as the container's command, with the container's environment (``RUNPOD_*``,
    ``PUBLIC_KEY``, ...; HOME=/root) and the pod's capabilities, once /workspace is mounted:
    ``/bin/sh`` sources it, then execs the image's ``/start.sh`` (RunPod's start script,
    which ends by exec'ing sshd), unless the command execs it itself. So what the command
    exports reaches the start script, what it starts and /etc/rp_environment. A RunPod
    template's start command is the container's command itself: prefix it with ``exec``
    (``exec bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'``), so that no shell
    is left waiting with the container's first environment. Its output goes to the pod's
    bootstrap.log. A command that fails or exits fails the start. Kept in the pod's state
    directory as ``start_command``.
    """
    if name not in load_pods():
        raise SandboxError(f"no sandbox pod named {name!r}")
    path = pod_state_dir(state_dir(), name) / "start_command"
    if command is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(command if command.endswith("\n") else command + "\n")


def api_env(root: Path | None = None) -> dict[str, str]:
    """Return the environment that points podstate's live inventory at the sandbox's RunPod
    API: ``RUNPOD_API_URL``, ``RUNPOD_API_KEY``, ``PODSTATE_SSH_KEY`` (the sandbox's client
    key) and ``PODSTATE_HOSTKEYS`` (a host-key store in the state directory, gone at
    ``down``). ``PODSTATE_PODS`` must not be set beside it: a pods file wins over the API.
    ``root`` is the state directory (default: ``state_dir()``).
    """
    root = root or state_dir()
    api = read_json(root / "sandbox.json").get("api")
    try:
        key = (root / API_KEY_FILE).read_text().strip()
    except OSError:
        key = ""
    if not api or not key:
        raise SandboxError("the sandbox is not up; run `podstate sandbox up` first")
    return {
        "RUNPOD_API_URL": api["url"],
        "RUNPOD_API_KEY": key,
        "PODSTATE_SSH_KEY": str(root / "id_ed25519"),
        "PODSTATE_HOSTKEYS": str(root / "hostkeys"),
    }


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
        ["unshare", "--mount", "--uts", "--propagation", "private", "--", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        detail = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise SandboxError(f"Linux mount/UTS namespaces do not work here ({detail})")


def _up(
    root: Path,
    count: int,
    base_port: int,
    disk: str,
    storage_route: Callable[[int], int] | None = None,
    nvidia_smi_delay: float = 0,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for stale in ("pods", "storage", "storaged"):  # left by a down() that was cut short
        if not _host_mounts_under(root / stale):
            shutil.rmtree(root / stale, ignore_errors=True)
    meta: dict[str, Any] = {"disk": disk, "storage": None, "api": None}
    write_json(root / "sandbox.json", meta, sort_keys=True)

    ports = free_ports(count + 1, base_port)
    names = [f"pod-{i}" for i in range(1, count + 1)]
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
    submounts = "".join(point + "\n" for point in software_mounts(root))
    records: dict[str, dict[str, Any]] = {}
    for number, (name, port) in enumerate(zip(names, ports, strict=False), start=1):
        shape = shape_for(number)
        pod_dir = pod_state_dir(root, name)
        prepare_pod(
            root, pod_dir, name, port, shape, storage_port, client_pub, disk, nvidia_smi_delay
        )
        (pod_dir / "submounts").write_text(submounts)
        records[name] = _pod_record(name, number, port, shape, pod_dir)
    meta["api"] = start_api(root)
    write_json(root / "sandbox.json", meta, sort_keys=True)
    for name, record in records.items():
        record.update(_start_pod(pod_state_dir(root, name)))
        record["created_at"] = record["started_at"]
        write_json(root / "pods.json", records, sort_keys=True)

    wait_for_banners(
        {
            name: (rec["port"], rec, pod_state_dir(root, name) / "bootstrap.log")
            for name, rec in records.items()
        }
    )
    known_hosts = "".join(_finish_start(root, name, record) for name, record in records.items())
    write_json(root / "pods.json", records, sort_keys=True)
    (root / "known_hosts").write_text(known_hosts)
    pods_file().write_text(pods_yaml(root, records))
    return pods_file()


def _pod_record(name: str, number: int, port: int, shape: Shape, pod_dir: Path) -> dict:
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
    }


def _start_pod(pod_dir: Path, last_start: str | None = None) -> dict[str, Any]:
    """Start a pod's bootstrap (which becomes its sshd); return its pid record and
    ``started_at``, its start time (later than ``last_start``, the pod's previous one)."""
    command = ["/bin/sh", str(FILES / "pod-bootstrap.sh")]
    started_at = start_time(last_start)
    record = spawn(["--mount", "--uts"], command, pod_dir, pod_dir / "bootstrap.log")
    return {**record, "started_at": started_at}


def _finish_start(root: Path, name: str, record: dict[str, Any]) -> str:
    """Complete the record of a pod whose sshd answers (its namespaces, its sshfs) and write
    its own known_hosts with the host key its start made; return that known_hosts line."""
    pod_dir = pod_state_dir(root, name)
    record["mnt_ns"], record["uts_ns"] = namespaces_of(record["pid"])
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
