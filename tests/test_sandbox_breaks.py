"""Sandbox pods as containers, against what tries to outlive them: a restart under load (CPU
loops, 1,500 sleepers, a process that ignores SIGTERM, a zombie its parent never waits for, a
job in a nested user and pid namespace), two sandboxes with the same pod names, pod_exec
after a restart, and ``down`` of a sandbox whose state directory was deleted. Afterwards no
process of a pod and none of its cgroups is left."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from podstate.sandbox import cgroups, container, inside, lifecycle, ssh
from podstate.sandbox.processes import alive, proc_start
from podstate.sandbox.state import pod_state_dir
from tests.test_sandbox import live, live_pods  # noqa: F401 # the fixture live names

PODSTATE = [str(Path(sys.executable).parent / "podstate"), "sandbox"]
STUBBORN = (
    "nohup sh -c 'trap \"\" TERM HUP INT; while :; do sleep 1; done' >/dev/null 2>&1 &"
    " for i in 1 2; do nohup sh -c 'while :; do :; done' >/dev/null 2>&1 & done;"
    " nohup python3 -c 'import os, time\nif os.fork() == 0: os._exit(0)\ntime.sleep(600)'"
    " >/dev/null 2>&1 &"
    " nohup unshare -Urpf --mount-proc sleep 600 >/dev/null 2>&1 &"
    " nohup sh -c 'i=0; while [ $i -lt 1500 ]; do sleep 60 & i=$((i+1)); done; wait'"
    " >/dev/null 2>&1 &"
    " sleep 2; ps -e | wc -l"
)


def _cgroups(root: Path, *names: str) -> list[Path]:
    """Return the cgroups the pods ``names`` of the sandbox at ``root`` have, or had."""
    if not (cgroups.BASE / cgroups.CONTROLLERS[0]).is_dir():
        pytest.skip("no cgroup v1 hierarchy of cpuacct on this machine")
    return [
        cgroups._path(pod_state_dir(root, name), controller)
        for name in names
        for controller in cgroups.CONTROLLERS
    ]


def _members(group: Path) -> list[str]:
    """Return the pids in the cgroup ``group``; none when it is gone."""
    try:
        return (group / "cgroup.procs").read_text().split()
    except OSError:
        return []


def _started(group: Path) -> dict[str, int | None]:
    """Return the pids in the cgroup ``group``, each with when it started."""
    return {pid: proc_start(int(pid)) for pid in _members(group)}


def _pid_inside(pid: str) -> str | None:
    """Return the pid process ``pid`` has in its own pid namespace; None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = (line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:"))
    return next(found, None)


def _run(root: Path, name: str, command: str) -> str:
    """Return what ``command`` prints on pod ``name`` of the sandbox at ``root``, over SSH."""
    done = subprocess.run(
        [*ssh.ssh_command(name, root), command], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@live
def test_a_restart_under_load_ends_every_process_and_touches_no_other_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every process of the restarted pod ends with its pid namespace, however it was
    started; the new container's cgroup holds its own processes alone; a second sandbox
    with the same pod names runs on; pod_exec reaches the new container; ``down`` leaves
    no process and no cgroup of either."""
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        monkeypatch.setenv("PODSTATE_SANDBOX", str(root))
        lifecycle.up(1)
    try:
        groups = _cgroups(one, "pod-1") + _cgroups(two, "pod-1")
        others = _started(groups[2])
        assert int(_run(one, "pod-1", STUBBORN)) > 1500
        # the other pod's lasting processes: there before the load and after it, the same
        # ones (a process of its start or of an SSH session may come and go meanwhile)
        again = _started(groups[2]).items()
        lasting = {pid: s for pid, s in again if s is not None and others.get(pid) == s}
        assert "1" in map(_pid_inside, lasting), lasting  # its start, process 1 inside
        old = {pid: proc_start(int(pid)) for pid in _members(groups[0])}
        assert len(old) > 1500

        monkeypatch.setenv("PODSTATE_SANDBOX", str(one))
        container.restart("pod-1")

        new = _members(groups[0])
        assert set(old) & set(new) == set() and len(new) < 20, new
        # ended: gone, or a zombie (sshfs's ssh, an orphan of the machine's init for a moment)
        assert [pid for pid, start in old.items() if alive(int(pid), start)] == []
        assert inside.pod_exec("pod-1", "ps -eo comm=").stdout.split().count("sleep") == 1
        # the other sandbox's pod lost none of its lasting processes
        assert [pid for pid, start in lasting.items() if not alive(int(pid), start)] == []
        assert _run(two, "pod-1", "hostname") == "pod-1\n"
    finally:
        for root in (one, two):
            monkeypatch.setenv("PODSTATE_SANDBOX", str(root))
            lifecycle.down()
    assert [group for group in groups if group.exists()] == []


@live
def test_down_removes_the_cgroups_of_a_sandbox_whose_state_directory_was_deleted(
    tmp_path: Path,
) -> None:
    """``down`` finds such a sandbox's processes by their mark and ends them; the pods'
    cgroups, named by the state directories that are gone, were left behind, one more pair
    at every such ``down``."""
    root = tmp_path / "orphaned"
    env = {**os.environ, "PODSTATE_SANDBOX": str(root)}
    subprocess.run([*PODSTATE, "up", "--pods", "2"], env=env, check=True, capture_output=True)
    groups = _cgroups(root, "pod-1", "pod-2")
    assert all(_members(group) for group in groups)

    shutil.rmtree(root)
    down = subprocess.run([*PODSTATE, "down"], env=env, capture_output=True, text=True)

    assert (down.returncode, down.stderr) == (0, "")
    assert [group for group in groups if group.exists()] == []
