"""Ansible's side of the fleet benchmark: the timed ``ansible-playbook --check``.

It gets an inventory with podstate's resolved desired state, and a fleet converged on its
own terms (the ~/.bashrc blocks its ``blockinfile`` adds).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from bench.common.steps import BIN, ROOT, BenchError, environ, timed

ANSIBLE_DIR = ROOT / "bench" / "ansible"


def ansible_inventory(pods_file: Path, vars_path: Path, work: Path) -> Path:
    """Return an Ansible inventory of the pods, each with podstate's resolved desired state.

    The desired state comes from podstate's own loader (sizes in bytes, modes filled in),
    so both tools work from the same vars directory.
    """
    from podstate.inventory.fleet import load_pods

    with environ(PODSTATE_PODS=str(pods_file), PODSTATE_VARS=str(vars_path)):
        pods = load_pods()
    hosts: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for pod in pods:
        data = pod.data
        defaults = {
            "ansible_user": data.get("ssh_user", "root"),
            "ansible_ssh_private_key_file": data["ssh_key"],
            "ansible_ssh_common_args": (
                f"-o UserKnownHostsFile={data['ssh_known_hosts_file']} -o StrictHostKeyChecking=yes"
            ),
        }
        hosts[pod.name] = {
            "ansible_host": data["ssh_hostname"],
            "ansible_port": data["ssh_port"],
            "cloud": data["cloud"],
            "podstate": data["podstate"],
        }
    path = work / "ansible-inventory.yaml"
    path.write_text(yaml.safe_dump({"all": {"vars": defaults, "hosts": hosts}}, sort_keys=False))
    return path


def _close_masters(control_dir: Path) -> None:
    """Exit the SSH ControlPersist masters Ansible left running (they would outlive the run)."""
    processes = [
        subprocess.Popen(
            ["ssh", "-F", "/dev/null", "-S", str(sock), "-O", "exit", "pod"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for sock in control_dir.iterdir()
        if sock.is_socket()
    ]
    for process in processes:
        process.wait(30)


def _changed(recap: str) -> int:
    return sum(int(n) for n in re.findall(r"\bchanged=(\d+)", recap))


# What ansible.builtin.blockinfile writes for fleet.yml's two ~/.bashrc hooks.
_HOOK = "[ -r /etc/profile.d/podstate.sh ] && . /etc/profile.d/podstate.sh"
_ANSIBLE_BLOCKS = (
    "f=$HOME/.bashrc; {{ printf '%s\\n' '# BEGIN podstate hook (top)' {hook} "
    "'# END podstate hook (top)'; cat \"$f\"; printf '%s\\n' '# BEGIN podstate hook (end)' "
    '{hook} \'# END podstate hook (end)\'; }} > "$f.new" && mv "$f.new" "$f"'
)


def add_ansible_blocks(names: list[str]) -> None:
    """Give each pod's ~/.bashrc the two blocks Ansible's blockinfile would add to it.

    podstate's hooks carry podstate's markers, Ansible's blockinfile its own, so a fleet
    converged by podstate lacks only those two blocks for Ansible. They are written from
    inside each pod (not over SSH, so no remote command is counted); the timed
    ``--check`` must then find nothing to change, which the cycle asserts.
    """
    import shlex

    from podstate.sandbox import inside

    command = _ANSIBLE_BLOCKS.format(hook=shlex.quote(_HOOK))
    for name in names:
        inside.pod_exec(name, command)


def ansible(
    pods: int, pods_file: Path, vars_path: Path, work: Path, env: dict[str, str], state: Path
) -> dict[str, Any]:
    """Return the timed ``ansible-playbook --check`` of fleet.yml on the converged fleet.

    Forks = pods; ControlPersist masters live in a directory of this cycle's and are closed
    afterwards, so every check starts from fresh connections, like the other tools. Raises
    BenchError when the check would change anything: the fleet must be converged.
    """
    control = work / "cp"
    control.mkdir()
    env = {
        **env,
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control),
        "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    playbook = [
        str(BIN / "ansible-playbook"),
        "-i",
        str(ansible_inventory(pods_file, vars_path, work)),
        "--forks",
        str(pods),
        "--check",
        str(ANSIBLE_DIR / "fleet.yml"),
    ]
    try:
        step, output = timed("ansible --check", playbook, env, state)
    finally:
        _close_masters(control)
    changed = _changed(output.split("PLAY RECAP", 1)[-1])
    if changed:
        raise BenchError(f"ansible --check: {changed} task(s) would change a converged fleet")
    return step
