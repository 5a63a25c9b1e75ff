"""What RunPod does to one pod's container: stop it, restart it, give it a start command.

``restart()`` does to a pod what RunPod does to a container at a stop and start, a restart,
a migration or a spot interruption: the container disk is wiped, the volume kept, the
start script runs again (a new host key, /etc/rp_environment, its ~/.bashrc line, PUBLIC_KEY
in authorized_keys), on the same address and port, with a new ``startedAt``. A pod may
have a start command (``set_start_command``), run at every container start before the
image's start script, as RunPod runs the template's container start command.
"""

from __future__ import annotations

from podstate.sandbox.lifecycle import finish_start, start_pod
from podstate.sandbox.processes import stop
from podstate.sandbox.ssh import wait_for_banners
from podstate.sandbox.state import SandboxError, load_pods, pod_state_dir, save_pod, state_dir


def stop_pod(name: str) -> None:
    """Stop a pod like a stopped container: its sshd, its sshfs and anything left inside.

    The pod becomes unreachable; status() reports it not running; down() still cleans up.
    """
    pod = load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    stop(pod_state_dir(state_dir(), name))


def restart(name: str) -> str:
    """Restart sandbox pod ``name`` as RunPod re-creates a container at a stop and start, a
    restart, a migration or a spot interruption; return once its start script has finished
    (its new sshd answers, its ~/.bashrc line is there).

    Every process of the pod ends (its sshd, its sessions, its sshfs, whatever else runs in
    it) and its namespaces go with them, so its container disk (everything outside the
    volume: /root, /etc, /scratch, ...) is gone. Then it starts again from its image, on
    the same address and port: its start command, if it has one (``set_start_command``),
    then RunPod's start script (PUBLIC_KEY into authorized_keys, a new host key, unless the
    start command put one back, sshd, Jupyter where JUPYTER_PASSWORD is set,
    /etc/rp_environment, its ~/.bashrc line) with nginx and `sleep infinity`. The
    volume (/workspace) is kept as it is. pods.json gets the new processes and
    ``started_at`` (RunPod's ``startedAt``: the restart's time, which the sandbox API
    reports); the pod's own known_hosts (``ssh_command``) gets the new key, the pods
    file's does not. A stopped pod (``stop_pod``) is started again. Raises SandboxError
    when the pod does not start (a failing start command, say), with the log's last line.

    A Vast instance (``vast`` in its record) keeps its container disk, as Vast does at a
    stop and start: its processes, /run, /dev/shm and every mount made in it are new.
    Returns what the restart did, in words.
    """
    root = state_dir()
    pod = load_pods().get(name)
    if pod is None:
        raise SandboxError(f"no sandbox pod named {name!r}")
    pod_dir = pod_state_dir(root, name)
    stop(pod_dir)
    record = {k: v for k, v in pod.items() if not k.startswith(("sshfs_", "sshd_"))}
    record.update(start_pod(pod_dir, pod.get("started_at")))
    save_pod(root, name, record)
    wait_for_banners({name: (record["port"], record, pod_dir / "bootstrap.log")})
    finish_start(root, name, record)
    save_pod(root, name, record)
    if record.get("vast"):
        return "container disk kept; processes, /dev/shm and mounts new; start script run"
    return "container disk wiped, /workspace kept, start script run"


def set_start_command(name: str, command: str | None) -> None:
    """Give sandbox pod ``name`` a start command (sh script text), or none (``None``).

    The pod's bootstrap runs it at every container start from the next one on (``restart``),
    as the container's command, with the container's environment (``RUNPOD_*``,
    ``PUBLIC_KEY``, ...; HOME=/root) and the pod's capabilities, once /workspace is mounted:
    ``/bin/sh`` sources it, then execs the image's ``/start.sh`` (RunPod's start script,
    which starts sshd and ends in ``sleep infinity``), unless the command execs it itself.
    So what the command exports reaches the start script, what it starts and
    /etc/rp_environment. A RunPod
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
