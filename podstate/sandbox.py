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
rest of podstate, and ``pods.json`` with each pod's shape and processes for tests.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import string
import subprocess
import time
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILES = Path(__file__).with_name("sandbox_files")
SSHD = "/usr/sbin/sshd"
DEFAULT_BASE_PORT = 42201
START_TIMEOUT_S = 60.0
# Each pod's container disk: the tmpfs holding its root filesystem's writable layer (tmpfs
# only takes memory for what is written).
DISK = "4G"

# Docker's default capability set: what an unprivileged RunPod container's root gets.
DOCKER_CAPS = (
    "chown dac_override fowner fsetid kill setgid setuid setpcap net_bind_service net_raw "
    "sys_chroot mknod audit_write setfcap"
).split()
# Where separately mounted host filesystems hold software a pod needs: each such mount (a
# direct child of the host's root mount) gets an overlay of its own in every pod, since the
# root overlay's lower layer stops at mount points.
SOFTWARE_DIRS = (
    "/usr", "/opt", "/home", "/srv", "/nix", "/snap", "/var", "/etc",
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
)  # fmt: skip
_POD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_POD_ENV = {
    "PATH": _POD_PATH,
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
}

ROOT_MESSAGE = "sandbox pods need root (they use Linux namespaces and mounts); run as root"
TOOLS_MESSAGE = "install openssh-server and sshfs (apt-get install openssh-server sshfs)"
ALREADY_UP_MESSAGE = "sandbox already up; run `podstate sandbox down` first"


class SandboxError(Exception):
    """A sandbox operation failed; the message is one line, fit for the command line."""


@dataclass(frozen=True)
class Shape:
    """What a pod looks like: cloud, GPUs, /dev/shm size, /workspace kind, privileges."""

    cloud: str  # "COMMUNITY" or "SECURE"
    gpus: int  # 0: no nvidia-smi at all
    gpu_name: str | None
    gpu_memory_mib: int
    link: str | None  # between every pair of GPUs: "PHB" (PCIe) or "NV<n>" (NVLink)
    shm: str  # /dev/shm tmpfs size, as mount(8) takes it
    workspace: str  # "sshfs" (network volume) or "local"
    privileged: bool  # keeps CAP_SYS_ADMIN (mounts work inside the pod)

    @property
    def nvlink(self) -> bool:
        """True when the GPUs talk over NVLink."""
        return bool(self.link and self.link.startswith("NV"))

    @property
    def shm_bytes(self) -> int:
        """Return the /dev/shm size in bytes, as df and statfs report it."""
        number, unit = re.fullmatch(r"(\d+)([KMG]?)", self.shm).groups()
        return int(number) * 1024 ** " KMG".index(unit or " ")

    def __str__(self) -> str:
        if self.gpus:
            link = f", {self.link}" if self.gpus > 1 else ""
            gpus = f"{self.gpus}x {self.gpu_name}{link}"
        else:
            gpus = "no GPU"
        extra = ", privileged" if self.privileged else ""
        return f"{self.cloud}, {gpus}, /dev/shm {self.shm}, /workspace {self.workspace}{extra}"


_RTX4090 = ("NVIDIA GeForce RTX 4090", 24564)
_H100 = ("NVIDIA H100 80GB HBM3", 81559)

SHAPES: list[Shape] = [
    Shape("COMMUNITY", 2, *_RTX4090, "PHB", "24G", "sshfs", False),
    Shape("SECURE", 8, *_H100, "NV18", "32G", "local", False),
    Shape("COMMUNITY", 1, *_RTX4090, None, "64M", "sshfs", False),
    Shape("COMMUNITY", 2, *_H100, "NV4", "8G", "local", True),
    Shape("SECURE", 0, None, 0, None, "20G", "sshfs", False),
]
# Pods past the fifth cycle through these (so pod-3 stays the only 64 MiB /dev/shm pod).
_CYCLE = (0, 1, 3, 4)


def shape_for(number: int) -> Shape:
    """Return the shape of pod-<number> (numbers start at 1)."""
    if number < 1:
        raise ValueError("pod numbers start at 1")
    if number <= len(SHAPES):
        return SHAPES[number - 1]
    return SHAPES[_CYCLE[(number - len(SHAPES) - 1) % len(_CYCLE)]]


@dataclass
class PodStatus:
    """One sandbox pod as ``status()`` sees it."""

    name: str
    port: int
    pid: int  # the pod's sshd
    running: bool  # its sshd is alive
    shape: Shape  # str(shape) is a one-line summary


# Popen objects of processes this interpreter started, so it can reap them.
_CHILDREN: dict[int, subprocess.Popen] = {}


def state_dir() -> Path:
    """Return the sandbox state directory: $PODSTATE_SANDBOX, or .sandbox in the cwd."""
    configured = os.environ.get("PODSTATE_SANDBOX")
    return Path(configured or Path.cwd() / ".sandbox").resolve()


def pods_file() -> Path:
    """Return the path of the pods file ``up()`` writes (YAML, podstate's pods file format)."""
    return state_dir() / "pods.yaml"


def pods_json() -> Path:
    """Return the path of the JSON record of each pod's shape, port and processes."""
    return state_dir() / "pods.json"


def ssh_command(name: str, root: Path | None = None) -> list[str]:
    """Return the ``ssh`` argv (without the remote command) that reaches sandbox pod ``name``.

    As a user would: the sandbox's key, strict checking against its known_hosts, no agent or
    config file of the caller's, no password prompt. ``root`` is the sandbox's state
    directory (default: ``state_dir()``).
    """
    root = root or state_dir()
    pod = _read_json(root / "pods.json").get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    return [
        "ssh", "-F", "/dev/null", "-i", str(root / "id_ed25519"),
        "-o", f"UserKnownHostsFile={root / 'known_hosts'}",
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
) -> Path:
    """Start ``pods`` sandbox pods and return the pods file written for them.

    Ports are the first free ones from ``base_port`` on; by default a base between 42201
    and 52000 derived from the state directory, so that two sandboxes (a demo and a test
    run, say) do not race for the same ports, and one sandbox keeps its ports. ``disk`` is each
    pod's container disk size, as mount(8) takes tmpfs sizes ("4G", "512M"). Returns once
    every pod's sshd answers with its SSH banner; on any failure, stops what it started and
    raises SandboxError. ``storage_route`` maps the storage sshd's port to the port the pods'
    sshfs connects to instead (a proxy that adds network latency, say; its caller runs it).
    """
    if pods < 1:
        raise SandboxError("a sandbox needs at least one pod")
    if not re.fullmatch(r"[1-9]\d*[kKmMgG]?", disk):
        raise SandboxError(f"disk size {disk!r} is not a size like 4G or 512M")
    _preflight()
    root = state_dir()
    if (root / "sandbox.json").exists():
        raise SandboxError(ALREADY_UP_MESSAGE)
    try:
        base = base_port or DEFAULT_BASE_PORT + zlib.crc32(str(root).encode()) % 40 * 250
        return _up(root, pods, base, disk, storage_route)
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
    the storage sshd. Safe to call when nothing is up, and from another process than up().
    """
    root = state_dir()
    if not root.is_dir():
        return
    meta = _read_json(root / "sandbox.json")
    _stop(_read_json(root / "pods.json").values(), [meta.get("storage") or {}])

    for mount_point in _host_mounts_under(root):
        subprocess.run(["umount", "-l", mount_point], capture_output=True)
    left = _host_mounts_under(root)
    if left:
        raise SandboxError(f"cannot unmount {left[0]}; unmount it and run down again")

    for name in ("pods", "storage", "storaged"):
        shutil.rmtree(root / name, ignore_errors=True)
    for name in ("pods.yaml", "pods.json", "known_hosts", "id_ed25519", "id_ed25519.pub"):
        (root / name).unlink(missing_ok=True)
    (root / "sandbox.json").unlink(missing_ok=True)
    try:
        root.rmdir()
    except OSError:
        pass


def status() -> list[PodStatus]:
    """Return every sandbox pod with its port, sshd pid, whether it runs, and its shape."""
    result = []
    for name, pod in _load_pods().items():
        result.append(
            PodStatus(
                name=name,
                port=pod["port"],
                pid=pod["pid"],
                running=_alive(pod["pid"], pod.get("pid_start")),
                shape=shape_for(pod["number"]),
            )
        )
    return result


def pod_exec(
    name: str, command: str, check: bool = True, timeout: float | None = 120
) -> subprocess.CompletedProcess:
    """Run ``bash -c command`` inside a pod (its namespaces and root), bypassing SSH.

    stdout and stderr come back as text. With check, a non-zero exit raises
    subprocess.CalledProcessError (which carries the output), like subprocess.run.
    """
    pod = _load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    if not _alive(pod["pid"], pod.get("pid_start")):
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


def stop_pod(name: str) -> None:
    """Stop a pod like a stopped container: its sshd, its sshfs and anything left inside.

    The pod becomes unreachable; status() reports it not running; down() still cleans up.
    """
    pod = _load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    _stop([pod], [])


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
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for stale in ("pods", "storage", "storaged"):  # left by a down() that was cut short
        if not _host_mounts_under(root / stale):
            shutil.rmtree(root / stale, ignore_errors=True)
    meta: dict[str, Any] = {"disk": disk, "storage": None}
    _write_json(root / "sandbox.json", meta)

    ports = _free_ports(count + 1, base_port)
    names = [f"pod-{i}" for i in range(1, count + 1)]
    storaged = root / "storaged"
    storaged.mkdir()
    (root / "storage").mkdir()
    _keygen(
        [root / "id_ed25519", storaged / "host_key", storaged / "client_key"]
        + [_pod_dir(root, name) / "seed/etc/ssh/ssh_host_ed25519_key" for name in names]
    )

    storage_port = ports[-1]
    storage_pub = _public_key(storaged / "host_key.pub")
    (storaged / "known_hosts").write_text(f"[127.0.0.1]:{storage_port} {storage_pub}\n")
    meta["storage"] = _start_storage(root, storage_port)
    _write_json(root / "sandbox.json", meta)
    _wait_for_banners({"storage sshd": (storage_port, meta["storage"], storaged / "sshd.log")})
    if storage_route is not None:  # sshfs goes through another port; its host key is the same
        storage_port = storage_route(storage_port)
        with open(storaged / "known_hosts", "a") as known:
            known.write(f"[127.0.0.1]:{storage_port} {storage_pub}\n")

    client_pub = _public_key(root / "id_ed25519.pub")
    submounts = "".join(point + "\n" for point in _software_mounts(root))
    records: dict[str, dict[str, Any]] = {}
    for number, (name, port) in enumerate(zip(names, ports, strict=False), start=1):
        shape = shape_for(number)
        pod_dir = _pod_dir(root, name)
        _prepare_pod(root, pod_dir, name, port, shape, storage_port, client_pub, disk)
        (pod_dir / "submounts").write_text(submounts)
        records[name] = _pod_record(name, number, port, shape, pod_dir)
    for name, record in records.items():
        record.update(_start_pod(_pod_dir(root, name)))
        _write_json(root / "pods.json", records)

    _wait_for_banners(
        {
            name: (rec["port"], rec, _pod_dir(root, name) / "bootstrap.log")
            for name, rec in records.items()
        }
    )
    for name, record in records.items():
        pod_dir = _pod_dir(root, name)
        record["mnt_ns"], record["uts_ns"] = _namespaces(record["pid"])
        if record["workspace"] == "sshfs":
            pid = int((pod_dir / "sshfs.pid").read_text())
            record["sshfs_pid"], record["sshfs_pid_start"] = pid, _proc_start(pid)
    _write_json(root / "pods.json", records)

    known_hosts = "".join(
        f"[127.0.0.1]:{rec['port']} "
        f"{_public_key(_pod_dir(root, name) / 'seed/etc/ssh/ssh_host_ed25519_key.pub')}\n"
        for name, rec in records.items()
    )
    (root / "known_hosts").write_text(known_hosts)
    pods_file().write_text(_pods_yaml(root, records))
    return pods_file()


def _pod_dir(root: Path, name: str) -> Path:
    return root / "pods" / name


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


def _free_ports(count: int, start: int) -> list[int]:
    ports: list[int] = []
    port = start
    while len(ports) < count:
        if port > 65535:
            raise SandboxError(f"not enough free TCP ports from {start} on")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # Like sshd: a port whose old connections linger in TIME_WAIT is free to listen on.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
                ports.append(port)
            except OSError:
                pass
        port += 1
    return ports


def _keygen(paths: list[Path]) -> None:
    """Generate ed25519 key pairs at the given paths, all at once."""
    procs = []
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        procs.append(
            subprocess.Popen(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    "podstate-sandbox",
                    "-f",
                    str(path),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        )
    for path, proc in zip(paths, procs, strict=True):
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SandboxError(f"ssh-keygen failed for {path}: {err.decode().strip()}")


def _public_key(path: Path) -> str:
    """Return 'type base64' from a public key file, without its comment."""
    return " ".join(path.read_text().split()[:2])


def _sshd_version() -> tuple[int, int]:
    out = subprocess.run([SSHD, "-V"], capture_output=True, text=True)
    found = re.search(r"OpenSSH_(\d+)\.(\d+)", out.stderr + out.stdout)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def _common_sshd_options() -> str:
    lines = [
        "ListenAddress 127.0.0.1",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "MaxSessions 50",
        "MaxStartups 200",
        "UseDNS no",
        "X11Forwarding no",
        "PrintMotd no",
    ]
    if _sshd_version() >= (9, 8):
        lines.append("PerSourcePenalties no")  # the tests open many connections quickly
    return "\n".join(lines) + "\n"


def _start_storage(root: Path, port: int) -> dict[str, Any]:
    """Start the storage sshd that serves every sshfs pod's /workspace; return its record."""
    storaged = root / "storaged"
    (storaged / "authorized_keys").write_text(_public_key(storaged / "client_key.pub") + "\n")
    (storaged / "sshd_config").write_text(
        "# podstate sandbox storage: serves each sshfs pod's /workspace (SFTP only)\n"
        f"Port {port}\n"
        f"HostKey {_quote(storaged / 'host_key')}\n"
        f"AuthorizedKeysFile {_quote(storaged / 'authorized_keys')}\n"
        "PermitRootLogin prohibit-password\n"
        "StrictModes no\n"
        "PidFile none\n"
        "LogLevel INFO\n"
        "AllowTcpForwarding no\n"
        "PermitTTY no\n"
        "Subsystem sftp internal-sftp\n"
        "ForceCommand internal-sftp\n" + _common_sshd_options()
    )
    # Its own mount namespace, for a private /run/sshd (privilege separation) without
    # touching the host's /run.
    script = (
        "mount -t tmpfs -o mode=0755 storage-run /run && mkdir -m 0755 /run/sshd && "
        f"exec {SSHD} -D -e -f {_shell_quote(storaged / 'sshd_config')}"
    )
    record = _spawn(["--mount"], ["/bin/sh", "-c", script], storaged, storaged / "sshd.log")
    return {"port": port, **record}


def _prepare_pod(
    root: Path,
    pod_dir: Path,
    name: str,
    port: int,
    shape: Shape,
    storage_port: int,
    client_pub: str,
    disk: str,
) -> None:
    """Write everything a pod's bootstrap needs into its state directory.

    seed/ holds the files the pod's root gets on top of the host's (the bootstrap copies
    them into the pod's root overlay): its /etc changes, /root, /tmp, /workspace and
    nvidia-smi stand-in.
    """
    seed = pod_dir / "seed"
    etc = seed / "etc"
    (etc / "ssh").mkdir(parents=True, exist_ok=True)
    (pod_dir / "disk").mkdir()
    pod_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(14))
    (pod_dir / "pod_id").write_text(pod_id + "\n")

    # /etc/ssh: the pod's own host key and sshd_config (the bootstrap hides the host's others).
    sftp = "/usr/lib/openssh/sftp-server"
    (etc / "ssh/sshd_config").write_text(
        f"# podstate sandbox pod {name}: the sshd a RunPod container's start script runs\n"
        f"Port {port}\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
        "PidFile /run/sshd.pid\n"
        "PermitRootLogin prohibit-password\n"
        "AuthorizedKeysFile .ssh/authorized_keys\n"
        "LogLevel VERBOSE\n"
        "AcceptEnv LANG LC_*\n"
        f"Subsystem sftp {sftp if os.access(sftp, os.X_OK) else 'internal-sftp'}\n"
        + _common_sshd_options()
    )
    _root_account(etc)
    (etc / "hostname").write_text(name + "\n")
    hosts = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
    (etc / "hosts").write_text(hosts.rstrip("\n") + f"\n127.0.1.1\t{name}\n")
    env = {
        "RUNPOD_POD_ID": pod_id,
        "RUNPOD_POD_HOSTNAME": f"{pod_id}-{port}",
        "RUNPOD_GPU_COUNT": str(shape.gpus),
        "RUNPOD_CPU_COUNT": str(os.cpu_count() or 1),
        "RUNPOD_DC_ID": "EU-RO-1" if shape.cloud == "SECURE" else "CA-MTL-1",
        "RUNPOD_TCP_PORT_22": str(port),
        "RUNPOD_PUBLIC_IP": "127.0.0.1",
        "PUBLIC_KEY": client_pub,
        "PIP_CACHE_DIR": "/workspace/.cache/pip",
        "UV_CACHE_DIR": "/workspace/.cache/uv",
        "HF_HOME": "/workspace/.cache/huggingface",
        "PATH": _POD_PATH,
    }
    (etc / "rp_environment").write_text("".join(f'export {k}="{v}"\n' for k, v in env.items()))

    # /root as RunPod's start script leaves it.
    home = seed / "root"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    skel = Path("/etc/skel")
    bashrc = (skel / ".bashrc").read_text() if (skel / ".bashrc").exists() else _FALLBACK_BASHRC
    (home / ".bashrc").write_text(bashrc.rstrip("\n") + "\nsource /etc/rp_environment\n")
    profile = (skel / ".profile").read_text() if (skel / ".profile").exists() else ""
    (home / ".profile").write_text(profile)
    (home / ".ssh/authorized_keys").write_text(client_pub + "\n")
    (home / ".ssh/authorized_keys").chmod(0o600)
    (seed / "tmp").mkdir(mode=0o1777)
    (seed / "tmp").chmod(0o1777)
    (seed / "workspace").mkdir(mode=0o755)

    if shape.gpus:
        local = seed / "usr/local"
        (local / "bin").mkdir(parents=True)
        shutil.copyfile(FILES / "nvidia-smi", local / "bin/nvidia-smi")
        (local / "bin/nvidia-smi").chmod(0o755)
        (local / "share/nvidia-smi-standin").mkdir(parents=True)
        (local / "share/nvidia-smi-standin/layout").write_text(_gpu_layout(name, shape))

    if shape.workspace == "sshfs":
        (root / "storage" / name).mkdir(mode=0o755)
        shutil.copyfile(root / "storaged/client_key", pod_dir / "storage_key")
        (pod_dir / "storage_key").chmod(0o600)
        shutil.copyfile(root / "storaged/known_hosts", pod_dir / "storage_known_hosts")
    else:
        (pod_dir / "workspace").mkdir(mode=0o755)
    _mirror_host_dirs(seed)

    settings = {
        "POD_NAME": name,
        "POD_DISK": disk,
        "POD_SHM": shape.shm,
        "POD_WORKSPACE": shape.workspace,
        "POD_PRIVILEGED": "1" if shape.privileged else "0",
        "STORAGE_PORT": str(storage_port),
        "STORAGE_DIR": str(root / "storage" / name),
        "DOCKER_CAPS": ",".join(f"+{cap}" for cap in DOCKER_CAPS),
    }
    (pod_dir / "pod.env").write_text(
        "".join(f"{k}={_shell_quote(v)}\n" for k, v in settings.items())
    )


def _mirror_host_dirs(seed: Path) -> None:
    """Give each directory in seed the mode and owner of the host's, where the host has it.

    The bootstrap copies seed/ over the pod's root with modes and owners, so a directory
    such as seed/etc must not change /etc's. The pod's own directories (/root, /tmp) keep
    theirs.
    """
    own = {seed / "root", seed / "tmp", seed / "workspace"}
    for directory in [seed, *sorted(p for p in seed.rglob("*") if p.is_dir())]:
        if directory in own or any(parent in own for parent in directory.parents):
            continue
        host = Path("/") / directory.relative_to(seed)
        try:
            info = host.stat()
        except OSError:
            continue
        if host.is_dir():
            os.chown(directory, info.st_uid, info.st_gid)
            directory.chmod(info.st_mode & 0o7777)


def _software_mounts(root: Path) -> list[str]:
    """Return host mount points under SOFTWARE_DIRS that are direct children of the root mount.

    They are directories the host sees but the pods' root overlay (whose lower layer is the
    root mount alone) does not; mounts in the state directory are left out.
    """
    entries = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        entries.append((fields[0], fields[1], _unescape(fields[4])))
    root_ids = [mount_id for mount_id, _, point in entries if point == "/"]
    if not root_ids:
        return []
    result: list[str] = []
    for _, parent, point in entries:
        if parent != root_ids[-1] or point in result or not os.path.isdir(point):
            continue
        if Path(point) == root or root in Path(point).parents:
            continue
        if any(point == top or point.startswith(top + "/") for top in SOFTWARE_DIRS):
            result.append(point)
    return result


def _root_account(etc: Path) -> None:
    """Give the pod's root RunPod's account: /bin/bash, and a password field sshd accepts.

    Without PAM, sshd refuses key logins to accounts whose password field starts with "!"
    (locked, as on Ubuntu desktops); containers have "*" there instead.
    """
    for name, field, wanted, bad in (
        ("passwd", 6, "/bin/bash", lambda v: v != "/bin/bash"),
        ("shadow", 1, "*", lambda v: v.startswith("!")),
    ):
        host = Path("/etc") / name
        try:
            lines = host.read_text().splitlines(keepends=True)
        except OSError:
            continue
        for i, line in enumerate(lines):
            fields = line.rstrip("\n").split(":")
            if fields[0] == "root" and len(fields) > field and bad(fields[field]):
                fields[field] = wanted
                lines[i] = ":".join(fields) + "\n"
                (etc / name).write_text("".join(lines))
                shutil.copystat(host, etc / name)
                info = host.stat()
                os.chown(etc / name, info.st_uid, info.st_gid)
                break


_FALLBACK_BASHRC = """\
# If not running interactively, don't do anything
case $- in
    *i*) ;;
      *) return;;
esac
"""


def _gpu_layout(name: str, shape: Shape) -> str:
    """Return the nvidia-smi stand-in's layout file for a pod."""
    if shape.nvlink:
        buses = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    else:
        buses = ["01", "21", "41", "61", "81", "A1", "C1", "E1"]
    lines = []
    for index in range(shape.gpus):
        gpu_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"podstate-sandbox/{name}/gpu{index}")
        # Eight-GPU boxes split their GPUs over two NUMA nodes, as HGX H100 servers do.
        numa = 1 if shape.gpus == 8 and index >= 4 else 0
        affinity = ("0-51,104-155", "52-103,156-207")[numa] if shape.gpus == 8 else "0-31"
        lines.append(
            f"gpu|{index}|{shape.gpu_name}|GPU-{gpu_uuid}|{shape.gpu_memory_mib}|"
            f"00000000:{buses[index % len(buses)]}:00.0|{affinity}|{numa}"
        )
    lines.append(f"link|{shape.link or 'PHB'}")
    lines.append("driver|550.127.05")
    lines.append("cuda|12.4")
    return "\n".join(lines) + "\n"


def _start_pod(pod_dir: Path) -> dict[str, Any]:
    """Start a pod's bootstrap (which becomes its sshd); return its pid record."""
    command = ["/bin/sh", str(FILES / "pod-bootstrap.sh")]
    return _spawn(["--mount", "--uts"], command, pod_dir, pod_dir / "bootstrap.log")


def _spawn(namespaces: list[str], command: list[str], cwd: Path, log_path: Path) -> dict[str, Any]:
    """Start ``command`` in new ``namespaces`` (unshare options) and a session of its own,
    logging to ``log_path``; return its pid record."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            ["unshare", *namespaces, "--propagation", "private", "--", *command],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={"PATH": _POD_PATH},
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return {"pid": proc.pid, "pid_start": _proc_start(proc.pid)}


def _wait_for_banners(targets: dict[str, tuple[int, dict[str, Any], Path]]) -> None:
    """Wait until each (port, process record, log) answers with an SSH banner."""
    pending = dict(targets)
    deadline = time.monotonic() + START_TIMEOUT_S + len(targets)
    while pending:
        for name, (port, record, log) in list(pending.items()):
            if not _alive(record["pid"], record.get("pid_start")):
                raise SandboxError(f"{name} did not start: {_why(log)}")
            if _ssh_banner(port):
                del pending[name]
        if not pending:
            return
        if time.monotonic() > deadline:
            name, (port, _, log) = next(iter(pending.items()))
            raise SandboxError(f"{name} did not answer on port {port} in time: {_why(log)}")
        time.sleep(0.05)


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def _why(log: Path) -> str:
    """Return the last meaningful line of a start-up log (and of sshd.log next to it)."""
    lines: list[str] = []
    for path in (log, log.with_name("sshd.log")):
        try:
            lines += [line.strip() for line in path.read_text(errors="replace").splitlines()]
        except OSError:
            pass
    lines = [line for line in lines if line]
    return lines[-1] if lines else "no output (see the logs in the sandbox state directory)"


def _pods_yaml(root: Path, records: dict[str, dict[str, Any]]) -> str:
    lines = [
        "defaults:",
        "  ssh_user: root",
        f"  ssh_key: {_yaml_str(str(root / 'id_ed25519'))}",
        f"  ssh_known_hosts_file: {_yaml_str(str(root / 'known_hosts'))}",
        '  ssh_strict_host_key_checking: "yes"',
        "pods:",
    ]
    for name, rec in records.items():
        lines += [
            f"  {name}:",
            "    ssh_hostname: 127.0.0.1",
            f"    ssh_port: {rec['port']}",
            f"    cloud: {rec['cloud']}",
        ]
    return "\n".join(lines) + "\n"


def _yaml_str(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_./-]+", value) else json.dumps(value)


def _quote(path: Path) -> str:
    """Quote a path for sshd_config."""
    return '"' + str(path) + '"'


def _shell_quote(value: object) -> str:
    return shlex.quote(str(value))


# --- processes --------------------------------------------------------------------------


def _proc_start(pid: int | None) -> int | None:
    """Return a live process's start time (clock ticks after boot); None if gone or zombie."""
    if not pid:
        return None
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _alive(pid: int | None, start: int | None) -> bool:
    """True when pid runs and is the process recorded (same start time, if recorded)."""
    now = _proc_start(pid)
    return now is not None and (start is None or now == start)


def _namespaces(pid: int) -> tuple[str | None, str | None]:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt"), os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return None, None


def _members(namespaces: set[tuple[str, str]]) -> list[int]:
    """Return the live processes inside any of the given (mount, UTS) namespace pairs."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if _namespaces(int(entry.name)) in namespaces and _proc_start(int(entry.name)):
            found.append(int(entry.name))
    return found


def _signal(processes: Iterable[tuple[int, int | None]], sig: int) -> None:
    for pid, start in processes:
        if _alive(pid, start):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def _wait_gone(processes: list[tuple[int, int | None]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        _reap()
        if not any(_alive(pid, start) for pid, start in processes):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _end(processes: list[tuple[int, int | None]], timeout: float = 3.0) -> None:
    """SIGTERM the processes, then SIGKILL the ones still there after timeout."""
    _signal(processes, signal.SIGTERM)
    if not _wait_gone(processes, timeout):
        _signal(processes, signal.SIGKILL)
        _wait_gone(processes, timeout)


def _reap() -> None:
    for pid, proc in list(_CHILDREN.items()):
        if proc.poll() is not None:
            del _CHILDREN[pid]


def _stop(pods: Iterable[dict[str, Any]], others: list[dict[str, Any]]) -> None:
    """End pods (sshfs, then sshd, then whatever else is in their namespaces), then others."""
    pods = list(pods)
    sshfs = [(p["sshfs_pid"], p.get("sshfs_pid_start")) for p in pods if p.get("sshfs_pid")]
    for pod in pods:  # pods stopped half-way through starting
        if not pod.get("sshfs_pid") and pod.get("dir"):
            pid = _sshfs_pid_file(Path(pod["dir"]))
            if pid:
                sshfs.append((pid, None))
    _end(sshfs)
    sshd = [(p["pid"], p.get("pid_start")) for p in pods if p.get("pid")]
    namespaces = {(p["mnt_ns"], p["uts_ns"]) for p in pods if p.get("mnt_ns")}
    for pid, start in sshd:
        if _alive(pid, start) and None not in _namespaces(pid):
            namespaces.add(_namespaces(pid))  # type: ignore[arg-type]
    _end(sshd)
    for _ in range(3):
        stragglers = [(pid, None) for pid in _members(namespaces)]
        if not stragglers:
            break
        _signal(stragglers, signal.SIGKILL)
        _wait_gone(stragglers, 3.0)
    _end([(o["pid"], o.get("pid_start")) for o in others if o.get("pid")])
    _reap()


def _sshfs_pid_file(pod_dir: Path) -> int | None:
    """Return the pid in a pod's sshfs.pid if it is an sshfs in another mount namespace."""
    try:
        pid = int((pod_dir / "sshfs.pid").read_text())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None
    if comm == "sshfs" and _namespaces(pid)[0] != _namespaces(os.getpid())[0]:
        return pid
    return None


def _load_pods() -> dict[str, dict[str, Any]]:
    pods = _read_json(pods_json())
    return dict(sorted(pods.items(), key=lambda item: item[1].get("number", 0)))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


# --- mounts -----------------------------------------------------------------------------


def _host_mounts_under(path: Path) -> list[str]:
    """Return this namespace's mount points at or under path, deepest first."""
    result = []
    prefix = str(path).rstrip("/") + "/"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point == str(path) or point.startswith(prefix):
            result.append(point)
    return sorted(result, key=len, reverse=True)


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)
