"""A sandbox pod's files, written before it starts: what its bootstrap copies into its root.

``seed/`` is the pod's image on top of the files of its root filesystem (the host's, or a
Debian release's: ``images``): its /etc (sshd_config, hostname,
hosts, root's account; no host key, as RunPod's base image has none), /root as the image
has it, /tmp, /workspace, RunPod's start script (/start.sh), the nvidia-smi stand-in and
those of nginx and Jupyter Lab, which the start script starts.
Beside it: ``container.env``, the container's environment (RunPod's variables and
``PUBLIC_KEY``), which the container's command gets at every container start, and
``pod.env``, the settings ``files/pod-bootstrap.sh`` reads.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import string
from collections.abc import Callable
from pathlib import Path

from podstate.procfs import unescape
from podstate.sandbox.processes import POD_PATH
from podstate.sandbox.shapes import Shape, gpu_layout
from podstate.sandbox.ssh import common_sshd_options

# The pod bootstrap, RunPod's start script and the nvidia-smi stand-in, shipped as package
# data.
FILES = Path(__file__).with_name("files")
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


def prepare_pod(
    root: Path,
    pod_dir: Path,
    name: str,
    port: int,
    shape: Shape,
    storage_port: int,
    client_pub: str,
    disk: str,
    nvidia_smi_delay: float = 0,
    image: Path = Path("/"),
) -> None:
    """Write everything a pod's bootstrap needs into its state directory.

    ``image`` is the root filesystem the pod's root overlays (``images.root_of``: the
    host's ``/`` or a Debian release's); the pod's /etc, /root and stand-ins are made from
    its files, so that they fit its tools.

    seed/ holds the files the pod's root gets on top of the host's (the bootstrap copies
    them into the pod's root overlay at every start): its /etc changes, /root, /tmp,
    /workspace and nvidia-smi stand-in (each call taking ``nvidia_smi_delay`` seconds). What
    RunPod's start script writes (the host key, /etc/rp_environment, the lines it appends to
    ~/.bashrc and authorized_keys) its /start.sh (files/start.sh) writes at every
    start, from the environment ``container.env`` gives it.
    """
    seed = pod_dir / "seed"
    etc = seed / "etc"
    (etc / "ssh").mkdir(parents=True, exist_ok=True)
    (pod_dir / "disk").mkdir()
    if shape.provider == "vast":  # a Vast instance (contract) id
        pod_id = str(10_000_000 + secrets.randbelow(90_000_000))
    else:
        pod_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(14))
    (pod_dir / "pod_id").write_text(pod_id + "\n")

    # /etc/ssh: the pod's sshd_config (the bootstrap hides the host's host keys and makes the
    # pod's own).
    sftp = "/usr/lib/openssh/sftp-server"
    sshd_options = common_sshd_options()  # for the host's sshd: a built image has its own
    if image != Path("/"):
        sshd_options = sshd_options.replace("PerSourcePenalties no\n", "")
        if openssh_at_least(image, (9, 8)):
            sshd_options += "PerSourcePenalties no\n"  # the tests open many connections
    (etc / "ssh/sshd_config").write_text(
        f"# podstate sandbox pod {name}: the sshd a RunPod container's start script runs\n"
        f"Port {port}\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
        "PidFile /run/sshd.pid\n"
        "PermitRootLogin prohibit-password\n"
        "AuthorizedKeysFile .ssh/authorized_keys\n"
        "LogLevel VERBOSE\n"
        "AcceptEnv LANG LC_*\n"
        f"Subsystem sftp {_sftp(image, sftp, shape)}\n" + sshd_options
    )
    _root_account(image, etc)
    (etc / "hostname").write_text(name + "\n")
    hosts = (image / "etc/hosts").read_text() if (image / "etc/hosts").exists() else ""
    (etc / "hosts").write_text(hosts.rstrip("\n") + f"\n127.0.1.1\t{name}\n")
    env = {
        "RUNPOD_POD_ID": pod_id,
        "RUNPOD_POD_HOSTNAME": f"{pod_id}-{port}",
        "RUNPOD_GPU_COUNT": str(shape.gpus),
        "RUNPOD_CPU_COUNT": str(os.cpu_count() or 1),
        "RUNPOD_DC_ID": shape.data_center,
        "RUNPOD_TCP_PORT_22": str(port),
        "RUNPOD_PUBLIC_IP": "127.0.0.1",
        "PUBLIC_KEY": client_pub,
        "PIP_CACHE_DIR": "/workspace/.cache/pip",
        "UV_CACHE_DIR": "/workspace/.cache/uv",
        "HF_HOME": "/workspace/.cache/huggingface",
        "PATH": POD_PATH,
    }
    if shape.provider == "vast":
        env = vast_environment(pod_id, port, shape, client_pub)
    # As /etc/rp_environment has it: export lines, values in double quotes.
    (pod_dir / "container.env").write_text("".join(f'export {k}="{v}"\n' for k, v in env.items()))

    # /root as the image has it (the bootstrap appends RunPod's lines).
    home = seed / "root"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    skel = image / "etc/skel"
    bashrc = (skel / ".bashrc").read_text() if (skel / ".bashrc").exists() else _FALLBACK_BASHRC
    tmux = VAST_AUTO_TMUX if shape.provider == "vast" else ""
    (home / ".bashrc").write_text(tmux + bashrc.rstrip("\n") + "\n")
    profile = (skel / ".profile").read_text() if (skel / ".profile").exists() else ""
    (home / ".profile").write_text(profile)
    (seed / "tmp").mkdir(mode=0o1777)
    (seed / "tmp").chmod(0o1777)
    (seed / "workspace").mkdir(mode=0o755)
    shutil.copyfile(FILES / "start.sh", seed / "start.sh")  # RunPod's start script
    (seed / "start.sh").chmod(0o755)
    _daemons(image, seed / "usr/local")

    if shape.gpus:
        local = seed / "usr/local"
        (local / "bin").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FILES / "nvidia-smi", local / "bin/nvidia-smi")
        (local / "bin/nvidia-smi").chmod(0o755)
        (local / "share/nvidia-smi-standin").mkdir(parents=True)
        layout = gpu_layout(name, shape, nvidia_smi_delay)
        (local / "share/nvidia-smi-standin/layout").write_text(layout)

    if shape.workspace == "sshfs":
        (root / "storage" / name).mkdir(mode=0o755)
        shutil.copyfile(root / "storaged/client_key", pod_dir / "storage_key")
        (pod_dir / "storage_key").chmod(0o600)
        shutil.copyfile(root / "storaged/known_hosts", pod_dir / "storage_known_hosts")
    else:
        (pod_dir / "workspace").mkdir(mode=0o755)
    _mirror_image_dirs(image, seed)

    settings = {
        "POD_NAME": name,
        "POD_DISK": disk,
        "POD_IMAGE": str(image),  # the lower layer of the pod's root
        "POD_SHM": shape.shm,
        "POD_WORKSPACE": shape.workspace,
        "POD_PRIVILEGED": "1" if shape.privileged else "0",
        # A Vast instance's container disk survives a stop: kept in the pod's state directory
        "POD_KEEP_DISK": "1" if shape.provider == "vast" else "0",
        "STORAGE_PORT": str(storage_port),
        "STORAGE_DIR": str(root / "storage" / name),
        "DOCKER_CAPS": ",".join(f"+{cap}" for cap in DOCKER_CAPS),
    }
    (pod_dir / "pod.env").write_text(
        "".join(f"{k}={shell_quote(v)}\n" for k, v in settings.items())
    )


def vast_environment(pod_id: str, port: int, shape: Shape, client_pub: str) -> dict[str, str]:
    """Return a Vast instance's container environment: its identity (``CONTAINER_ID``,
    ``VAST_CONTAINERLABEL``), its per-instance key ``CONTAINER_API_KEY`` (a secret podstate
    must never read), the address, GPUs and the SSH key Vast passes; no RunPod variable."""
    return {
        "CONTAINER_ID": pod_id,
        "VAST_CONTAINERLABEL": f"C.{pod_id}",
        "CONTAINER_API_KEY": "vastai_sandbox_" + secrets.token_hex(16),
        "PUBLIC_IPADDR": "127.0.0.1",
        "GPU_COUNT": str(shape.gpus),
        "VAST_TCP_PORT_22": str(port),
        "SSH_PUBLIC_KEY": client_pub,
        "DATA_DIRECTORY": "/workspace/",
        "PATH": POD_PATH,
    }


# Vast's login habit: an SSH session starts inside tmux unless ~/.no_auto_tmux exists, before
# anything else in ~/.bashrc, which bash reads for a command sshd runs too. Without a
# terminal tmux fails, and the session ends without running the command.
VAST_AUTO_TMUX = """\
if [ -z "$TMUX" ] && [ -n "$SSH_CONNECTION" ] && [ ! -f ~/.no_auto_tmux ]; then
    tmux attach-session -t ssh_tmux || tmux new-session -s ssh_tmux
    exit
fi
"""


def _sftp(image: Path, server: str, shape: Shape) -> str:
    """Return the sshd_config's sftp subsystem: Vast's sshd serves SFTP itself (an upload
    goes through no login shell, so no tmux), RunPod's runs ``server`` where ``image`` has
    it."""
    if shape.provider != "vast" and os.access(image / server.lstrip("/"), os.X_OK):
        return server
    return "internal-sftp"


def _daemons(image: Path, local: Path) -> None:
    """Put in the image (``local`` is its /usr/local) the stand-ins for what RunPod's start
    script starts besides sshd: nginx (``sbin/nginx``, sleep under that name: its
    /proc/PID/comm reads nginx) and Jupyter Lab (``bin/jupyter-lab``, a Python script that
    waits: a Python interpreter whose comm reads jupyter-lab, as the real one's does), each
    running ``image``'s own program."""
    (local / "sbin").mkdir(parents=True, exist_ok=True)
    (local / "bin").mkdir(parents=True, exist_ok=True)
    sleep = _program(image, "sleep") or "/bin/sleep"
    (local / "sbin/nginx").symlink_to(sleep)
    python = _program(image, "python3") or "/usr/bin/python3"
    (local / "bin/jupyter-lab").write_text(
        f"#!{python}\n"
        '"""Jupyter Lab\'s stand-in in a sandbox pod: a Python process that waits."""\n'
        "import signal\n\nsignal.pause()\n"
    )
    (local / "bin/jupyter-lab").chmod(0o755)


def _program(image: Path, name: str) -> str | None:
    """Return the path, as the pod sees it, of program ``name`` on the pod's PATH in
    ``image``; None where it has none."""
    path = ":".join(str(image / part.lstrip("/")) for part in POD_PATH.split(":"))
    found = shutil.which(name, path=path)
    return "/" + str(Path(found).relative_to(image)) if found else None


def openssh_at_least(image: Path, version: tuple[int, int]) -> bool:
    """Return whether ``image``'s openssh-server is ``version`` or newer, by its dpkg record
    (its sshd may not run on the host's libraries); False where none is recorded."""
    try:
        status = (image / "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return False
    found = re.search(
        r"^Package: openssh-server\n(?:.+\n)*?Version: (?:\d+:)?(\d+)\.(\d+)", status, re.M
    )
    return found is not None and (int(found[1]), int(found[2])) >= version


def _mirror_image_dirs(image: Path, seed: Path) -> None:
    """Give each directory in seed the mode and owner of the image's, where it has it.

    The bootstrap copies seed/ over the pod's root with modes and owners, so a directory
    such as seed/etc must not change /etc's. The pod's own directories (/root, /tmp) keep
    theirs.
    """
    own = {seed / "root", seed / "tmp", seed / "workspace"}
    for directory in [seed, *sorted(p for p in seed.rglob("*") if p.is_dir())]:
        if directory in own or any(parent in own for parent in directory.parents):
            continue
        host = image / directory.relative_to(seed)
        try:
            info = host.stat()
        except OSError:
            continue
        if host.is_dir():
            os.chown(directory, info.st_uid, info.st_gid)
            directory.chmod(info.st_mode & 0o7777)


def software_mounts(root: Path) -> list[str]:
    """Return host mount points under SOFTWARE_DIRS that are direct children of the root mount.

    They are directories the host sees but the pods' root overlay (whose lower layer is the
    root mount alone) does not; mounts in the state directory are left out.
    """
    entries = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        entries.append((fields[0], fields[1], unescape(fields[4])))
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


def _root_account(image: Path, etc: Path) -> None:
    """Give the pod's root RunPod's account: /bin/bash, and a password field sshd accepts.

    Without PAM, sshd refuses key logins to accounts whose password field starts with "!"
    (locked, as on Ubuntu desktops); containers have "*" there instead.
    """
    # (file, field, what root's field must be, whether a value must be replaced)
    accounts: tuple[tuple[str, int, str, Callable[[str], bool]], ...] = (
        ("passwd", 6, "/bin/bash", lambda v: v != "/bin/bash"),
        ("shadow", 1, "*", lambda v: v.startswith("!")),
    )
    for name, field, wanted, bad in accounts:
        host = image / "etc" / name
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


def shell_quote(value: object) -> str:
    return shlex.quote(str(value))
