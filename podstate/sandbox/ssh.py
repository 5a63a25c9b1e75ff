"""OpenSSH for sandbox pods: key pairs, shared sshd options, ports, the wait for a banner,
and the ssh client that reaches a pod as a user would (``ssh_command``, ``ssh``)."""

from __future__ import annotations

import fcntl
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from podstate.sandbox.processes import alive
from podstate.sandbox.state import SandboxError, pod_state_dir, read_json, state_dir

SSHD = "/usr/sbin/sshd"
START_TIMEOUT_S = 60.0


# One file per port that a sandbox which is up holds, naming its state directory: sandboxes
# that start at once (test files run in parallel) never take the same port, nor one whose
# pod is down for a restart.
PORT_CLAIMS = Path("/run/podstate-sandbox-ports")


def free_ports(count: int, start: int, owner: Path) -> list[int]:
    """Return ``count`` ports from ``start`` on that nothing listens on and no other sandbox
    that is up holds, now held for the sandbox of state directory ``owner`` until
    ``release_ports``. A claim whose sandbox has no ``sandbox.json`` any more is stale."""
    PORT_CLAIMS.mkdir(parents=True, exist_ok=True)
    ports: list[int] = []
    with open(PORT_CLAIMS / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        port = start
        while len(ports) < count:
            if port > 65535:
                raise SandboxError(f"not enough free TCP ports from {start} on")
            claim = PORT_CLAIMS / str(port)
            holder = claim.read_text() if claim.exists() else ""
            held = holder not in ("", str(owner)) and (Path(holder) / "sandbox.json").exists()
            if not held and _bindable(port):
                claim.write_text(str(owner))
                ports.append(port)
            port += 1
    return ports


def release_ports(owner: Path) -> None:
    """Let go of the ports the sandbox of state directory ``owner`` holds."""
    if not PORT_CLAIMS.is_dir():
        return
    with open(PORT_CLAIMS / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for claim in PORT_CLAIMS.glob("[0-9]*"):
            if claim.read_text() == str(owner):
                claim.unlink()


def _bindable(port: int) -> bool:
    """Return whether a socket can bind ``port`` on 127.0.0.1: nothing listens there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Like sshd: a port whose old connections linger in TIME_WAIT is free to listen on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def keygen(paths: list[Path]) -> None:
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


def public_key(path: Path) -> str:
    """Return 'type base64' from a public key file, without its comment."""
    return " ".join(path.read_text().split()[:2])


def _sshd_version() -> tuple[int, int]:
    out = subprocess.run([SSHD, "-V"], capture_output=True, text=True)
    found = re.search(r"OpenSSH_(\d+)\.(\d+)", out.stderr + out.stdout)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def common_sshd_options() -> str:
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


def wait_for_banners(targets: dict[str, tuple[int, dict[str, Any], Path]]) -> None:
    """Wait until each (port, process record, log) answers with an SSH banner."""
    pending = dict(targets)
    deadline = time.monotonic() + START_TIMEOUT_S + len(targets)
    while pending:
        for name, (port, record, log) in list(pending.items()):
            if not alive(record["pid"], record.get("pid_start")):
                raise SandboxError(f"{name} did not start: {_why(log)}")
            if _ssh_banner(port):
                del pending[name]
        if not pending:
            return
        if time.monotonic() > deadline:
            name, (port, _, log) = next(iter(pending.items()))
            raise SandboxError(f"{name} did not answer on port {port} in time: {_why(log)}")
        time.sleep(0.05)


def wait_for_start_script(name: str, record: dict[str, Any], pod_dir: Path) -> int:
    """Wait until pod ``name``'s start script has finished (its ``started`` file says so)
    and return its sshd's pid.

    RunPod's start script appends its ~/.bashrc line and writes /etc/rp_environment after
    sshd answers; ``up`` and ``restart`` return only once it has, so that what a test does
    next meets the pod as the start script left it.
    """
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            lines = (pod_dir / "started").read_text().splitlines()
        except OSError:
            lines = []
        if "finished" in lines:
            return int(next(line for line in lines if line.startswith("sshd "))[5:])
        if not alive(record["pid"], record.get("pid_start")):
            raise SandboxError(f"{name} did not start: {_why(pod_dir / 'bootstrap.log')}")
        if time.monotonic() > deadline:
            raise SandboxError(f"{name}'s start script did not finish in time")
        time.sleep(0.05)


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def _why(log: Path) -> str:
    """Return the last meaningful line written to a start-up log or to sshd.log next to it.

    Both logs outlive a pod's restarts, so the line is taken from the one written last:
    the bootstrap's own complaint, or sshd's.
    """
    found: list[tuple[int, str]] = []
    for path in (log, log.with_name("sshd.log")):
        try:
            lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
            written = path.stat().st_mtime_ns
        except OSError:
            continue
        lines = [line for line in lines if line]
        if lines:
            found.append((written, lines[-1]))
    if not found:
        return "no output (see the logs in the sandbox state directory)"
    return max(found, key=lambda item: item[0])[1]


def sshd_quote(path: Path) -> str:
    """Quote a path for sshd_config."""
    return '"' + str(path) + '"'


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
) -> subprocess.CompletedProcess[str]:
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
