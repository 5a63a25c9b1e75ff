"""Sandbox pods, checked through real SSH the way podstate reaches RunPod pods."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from podstate.sandbox import container, inside, lifecycle, ssh
from podstate.sandbox.processes import host_pid, marked
from podstate.sandbox.shapes import SHAPES, shape_for
from podstate.sandbox.ssh import SSHD
from podstate.sandbox.state import SandboxError, pods_file

if os.geteuid() != 0:
    _CANNOT = "sandbox pods need root (Linux namespaces and mounts)"
elif not (os.access(SSHD, os.X_OK) and shutil.which("sshfs") and shutil.which("ssh")):
    _CANNOT = "sandbox pods need openssh-server, openssh-client and sshfs"
else:
    _CANNOT = ""


@pytest.fixture
def live_pods():
    """Fail (or, asked to, skip) a test that needs sandbox pods where none can start."""
    if _CANNOT:
        from tests.conftest import cannot_run_e2e

        cannot_run_e2e(_CANNOT)


live = pytest.mark.usefixtures("live_pods")

SHAPE_OF = {f"pod-{i}": SHAPES[i - 1] for i in range(1, 6)}
GPU_PODS = [name for name, shape in SHAPE_OF.items() if shape.gpus]


class Box:
    """A running sandbox: its state directory and pods.json."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pods = json.loads((root / "pods.json").read_text())

    def ssh(self, name: str, command: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run command on a pod through ssh with strict host key checking."""
        return subprocess.run(
            [*ssh.ssh_command(name, self.root), command],
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )


def _gone(pid: int) -> bool:
    """True when pid no longer runs (exited, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def _host_mount_points() -> list[str]:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("sandbox") / "state"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PODSTATE_SANDBOX", str(root))
        lifecycle.up(5)
        try:
            yield Box(root)
        finally:
            lifecycle.down()


# --- without pods -----------------------------------------------------------------------


def test_shapes_cycle_keeping_one_small_shm_pod() -> None:
    shapes = [shape_for(i) for i in range(1, 49)]
    assert shapes[:5] == SHAPES
    assert shapes[5:9] == [SHAPES[i] for i in (0, 1, 3, 4)]
    assert [i + 1 for i, s in enumerate(shapes) if s.shm == "64M"] == [3]
    assert SHAPES[2].shm_bytes == 64 * 1024**2
    assert [s.privileged for s in SHAPES] == [False, False, False, True, False]


def test_two_sandboxes_never_take_the_same_port(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A port one sandbox that is up holds, another skips, even when nothing listens on it
    (a pod down for a restart); ports let go of, or held by a sandbox that is down (its
    sandbox.json gone), are taken."""
    monkeypatch.setattr(ssh, "PORT_CLAIMS", tmp_path / "claims")
    one, two, three, four = (tmp_path / name for name in ("one", "two", "three", "four"))
    for root in (one, two, three, four):
        root.mkdir()
        (root / "sandbox.json").write_text("{}")
    taken = ssh.free_ports(3, 20001, one)
    held = ssh.free_ports(3, 20001, two)
    assert not set(held) & set(taken)
    ssh.release_ports(one)
    assert ssh.free_ports(3, 20001, three) == taken
    (two / "sandbox.json").unlink()
    assert ssh.free_ports(3, 20001, four) == held


def test_up_refuses_without_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PODSTATE_SANDBOX", str(tmp_path / "state"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxError, match="need root") as error:
        lifecycle.up(1)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "state").exists()


def test_up_names_missing_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PODSTATE_SANDBOX", str(tmp_path / "state"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "sshfs" else "/bin/" + tool)
    with pytest.raises(SandboxError, match=r"apt-get install openssh-server sshfs"):
        lifecycle.up(1)


def test_down_without_sandbox_is_a_no_op(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PODSTATE_SANDBOX", str(tmp_path / "nothing"))
    lifecycle.down()
    assert lifecycle.status() == []
    assert not (tmp_path / "nothing").exists()


# --- a five-pod sandbox -----------------------------------------------------------------


@live
def test_pods_file_lists_every_pod(box: Box) -> None:
    doc = yaml.safe_load(pods_file().read_text())
    assert doc["defaults"] == {
        "ssh_user": "root",
        "ssh_key": str(box.root / "id_ed25519"),
        "ssh_known_hosts_file": str(box.root / "known_hosts"),
        "ssh_strict_host_key_checking": "yes",
    }
    assert list(doc["pods"]) == list(SHAPE_OF)
    known_hosts = (box.root / "known_hosts").read_text().splitlines()
    for name, pod in doc["pods"].items():
        assert pod == {
            "ssh_hostname": "127.0.0.1",
            "ssh_port": box.pods[name]["port"],
            "cloud": SHAPE_OF[name].cloud,
        }
        assert any(
            re.fullmatch(rf"\[127\.0\.0\.1\]:{pod['ssh_port']} ssh-ed25519 AAAA\S+", line)
            for line in known_hosts
        )
    assert len({pod["ssh_port"] for pod in doc["pods"].values()}) == 5


@live
def test_status_reports_running_pods_and_shapes(box: Box) -> None:
    pods = lifecycle.status()
    assert [p.name for p in pods] == list(SHAPE_OF)
    for pod in pods:
        assert pod.running
        assert pod.shape == SHAPE_OF[pod.name]
        assert (pod.port, pod.pid) == (box.pods[pod.name]["port"], box.pods[pod.name]["pid"])
    assert box.pods["pod-4"]["privileged"] and box.pods["pod-2"]["nvlink"]
    assert box.pods["pod-1"]["workspace"] == "sshfs" and box.pods["pod-2"]["workspace"] == "local"


@live
def test_second_up_is_refused(box: Box) -> None:
    with pytest.raises(SandboxError, match="already up"):
        lifecycle.up(1)
    assert lifecycle.status()[0].running


@pytest.mark.parametrize("name", list(SHAPE_OF))
@live
def test_hostname_is_pod_name(box: Box, name: str) -> None:
    assert box.ssh(name, "hostname").stdout.strip() == name


@pytest.mark.parametrize("name", list(SHAPE_OF))
@live
def test_dev_shm_size_follows_shape(box: Box, name: str) -> None:
    out = box.ssh(name, "df -B1 --output=size /dev/shm | tail -n 1").stdout
    assert int(out) == SHAPE_OF[name].shm_bytes


@pytest.mark.parametrize("name", list(SHAPE_OF))
@live
def test_workspace_kind_and_writable(box: Box, name: str) -> None:
    token = uuid.uuid4().hex
    out = box.ssh(
        name,
        "awk '$2 == \"/workspace\" {print $3}' /proc/mounts | tail -n 1; "
        f"mkdir -p /workspace/.cache && echo {token} > /workspace/.cache/probe && "
        "cat /workspace/.cache/probe",
    ).stdout.split()
    fstype, written = out[0], out[-1]
    assert written == token
    if SHAPE_OF[name].workspace == "sshfs":
        assert fstype == "fuse.sshfs"
        backing = box.root / "storage" / name / ".cache/probe"
    else:
        assert fstype != "fuse.sshfs"
        backing = box.root / "pods" / name / "workspace/.cache/probe"
    assert backing.read_text().strip() == token


@live
def test_unprivileged_pod_cannot_mount(box: Box) -> None:
    result = box.ssh("pod-1", "mount -t tmpfs tmpfs /mnt", check=False)
    assert result.returncode != 0
    assert "permission denied" in result.stderr.lower()
    cap_eff = box.ssh("pod-1", "awk '/^CapEff/ {print $2}' /proc/self/status").stdout
    assert not int(cap_eff, 16) & (1 << 21)  # CAP_SYS_ADMIN


@live
def test_privileged_pod_mounts_stay_in_the_pod(box: Box) -> None:
    cap_eff = box.ssh("pod-4", "awk '/^CapEff/ {print $2}' /proc/self/status").stdout
    assert int(cap_eff, 16) & (1 << 21)
    box.ssh("pod-4", "mount -t tmpfs -o size=1M podstate-probe /mnt")
    try:
        seen = box.ssh("pod-4", "grep -c '^podstate-probe /mnt tmpfs' /proc/mounts").stdout
        assert int(seen) == 1
        assert "podstate-probe" not in Path("/proc/mounts").read_text()
        other = box.ssh("pod-2", "grep -c '^podstate-probe ' /proc/mounts", check=False).stdout
        assert int(other) == 0
    finally:
        box.ssh("pod-4", "umount /mnt")
    assert "podstate-probe" not in box.ssh("pod-4", "cat /proc/mounts").stdout


@pytest.mark.parametrize("name", GPU_PODS)
@live
def test_nvidia_smi_lists_the_shape_gpus(box: Box, name: str) -> None:
    shape = SHAPE_OF[name]
    lines = box.ssh(name, "nvidia-smi -L").stdout.splitlines()
    assert len(lines) == shape.gpus
    for index, line in enumerate(lines):
        assert re.fullmatch(
            rf"GPU {index}: {re.escape(shape.gpu_name)} \(UUID: GPU-[0-9a-f]{{8}}"
            r"(-[0-9a-f]{4}){3}-[0-9a-f]{12}\)",
            line,
        )
    query = "nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader"
    rows = box.ssh(name, query).stdout.splitlines()
    assert rows == [f"{i}, {shape.gpu_name}, {shape.gpu_memory_mib} MiB" for i in range(shape.gpus)]
    csv = box.ssh(name, "nvidia-smi --query-gpu=memory.total,uuid --format=csv,nounits").stdout
    assert csv.splitlines()[0] == "memory.total [MiB], uuid"
    assert csv.splitlines()[1].startswith(f"{shape.gpu_memory_mib}, GPU-")


@pytest.mark.parametrize("name", GPU_PODS)
@live
def test_nvidia_smi_topology_matrix(box: Box, name: str) -> None:
    shape = SHAPE_OF[name]
    out = box.ssh(name, "nvidia-smi topo -m").stdout
    header, *rest = out.splitlines()
    gpus = [f"GPU{i}" for i in range(shape.gpus)]
    assert header == "\t" + "\t".join(gpus + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])
    rows = rest[: shape.gpus]
    for i, row in enumerate(rows):
        cells = row.split("\t")
        assert cells[0] == f"GPU{i}"
        links = cells[1 : shape.gpus + 1]
        assert links[i] == " X "
        assert {c for j, c in enumerate(links) if j != i} <= {shape.link}
    assert rest[shape.gpus] == ""
    assert "Legend:" in out and "NV#  = Connection traversing a bonded set of # NVLinks" in out
    if shape.gpus > 1:
        assert shape.link in rows[0]


@live
def test_pod_without_gpus_has_no_nvidia_smi(box: Box) -> None:
    result = box.ssh("pod-5", "command -v nvidia-smi", check=False)
    assert result.returncode != 0 and result.stdout == ""
    assert box.ssh("pod-2", "command -v nvidia-smi").stdout.strip() == "/usr/local/bin/nvidia-smi"


@live
def test_rp_environment_only_reaches_interactive_shells(box: Box) -> None:
    interactive = box.ssh("pod-1", "bash -ic 'echo $PIP_CACHE_DIR' 2>/dev/null").stdout
    assert interactive.strip() == "/workspace/.cache/pip"
    assert box.ssh("pod-1", 'echo "[$PIP_CACHE_DIR]"').stdout.strip() == "[]"
    env = box.ssh("pod-2", "cat /etc/rp_environment").stdout
    assert 'export RUNPOD_GPU_COUNT="8"' in env
    assert 'export HF_HOME="/workspace/.cache/huggingface"' in env
    assert re.search(r'^export RUNPOD_POD_ID="[a-z0-9]{14}"$', env, re.M)
    bashrc = box.ssh("pod-2", "tail -n 1 /root/.bashrc").stdout
    assert bashrc.strip() == "source /etc/rp_environment"


@live
def test_etc_writes_stay_in_the_pod(box: Box) -> None:
    path = f"/etc/podstate-probe-{uuid.uuid4().hex}"
    box.ssh("pod-1", f"echo private > {path}")
    assert box.ssh("pod-1", f"cat {path}").stdout.strip() == "private"
    assert not Path(path).exists()
    assert box.ssh("pod-2", f"test -e {path}", check=False).returncode == 1
    assert inside.pod_exec("pod-1", f"cat {path}").stdout.strip() == "private"
    assert inside.pod_exec("pod-2", f"test -e {path}", check=False).returncode == 1


@live
def test_every_path_a_pod_writes_stays_in_that_pod(box: Box) -> None:
    path = f"/scratch-test-{uuid.uuid4().hex}"
    box.ssh("pod-1", f"mkdir -p {path}/tmp && touch {path}/tmp/file")
    assert box.ssh("pod-1", f"test -f {path}/tmp/file && echo yes").stdout.strip() == "yes"
    assert inside.pod_exec("pod-1", f"test -f {path}/tmp/file && echo yes").stdout == "yes\n"
    assert box.ssh("pod-2", f"test -e {path}", check=False).returncode == 1
    assert inside.pod_exec("pod-2", f"test -e {path}", check=False).returncode == 1
    assert not Path(path).exists()


@pytest.mark.parametrize("name", ["pod-1", "pod-4"])
@live
def test_root_is_the_pods_own_container_disk(box: Box, name: str) -> None:
    mounts = box.ssh(name, "cat /proc/self/mounts").stdout.splitlines()
    points = [line.split()[1] for line in mounts]
    assert points[0] == "/" and mounts[0].split()[2] == "overlay"
    assert {"/", "/proc", "/dev/shm", "/run", "/workspace"} <= set(points)
    assert not [p for p in points if str(box.root) in p]  # no host paths
    size = box.ssh(name, "df -B1 --output=size / | tail -n 1").stdout
    assert int(size) == 4 * 1024**3
    assert box.ssh(name, "python3 -c 'print(1)'").stdout == "1\n"
    assert box.ssh(name, "/usr/bin/python3 -c 'import sys; print(sys.prefix)'").stdout == "/usr\n"


@live
def test_privileged_pod_mounts_show_as_the_pod_sees_them(box: Box) -> None:
    box.ssh("pod-4", "mkdir -p /mnt/x && mount -t tmpfs -o size=1m t /mnt/x")
    try:
        assert " /mnt/x tmpfs " in box.ssh("pod-4", "cat /proc/self/mounts").stdout
        assert not Path("/mnt/x").exists()
    finally:
        box.ssh("pod-4", "umount /mnt/x")
    denied = box.ssh("pod-1", "mkdir -p /mnt/x && mount -t tmpfs -o size=1m t /mnt/x", check=False)
    assert denied.returncode != 0
    assert " /mnt/x " not in box.ssh("pod-1", "cat /proc/self/mounts").stdout


@live
def test_host_has_no_workspace_while_up(box: Box) -> None:
    assert not Path("/workspace").exists()
    assert "/workspace" not in _host_mount_points()


@live
def test_root_and_tmp_are_the_pods_own(box: Box) -> None:
    box.ssh("pod-1", "echo one > /tmp/probe && echo one > /root/probe")
    assert box.ssh("pod-2", "test -e /tmp/probe || test -e /root/probe", check=False).returncode
    assert not Path("/root/probe").exists()
    keys = box.ssh("pod-3", "cat /root/.ssh/authorized_keys").stdout.strip()
    assert keys == " ".join((box.root / "id_ed25519.pub").read_text().split()[:2])


@live
def test_pod_exec_runs_inside_the_pod(box: Box) -> None:
    result = inside.pod_exec("pod-2", "hostname; test -d /run/sshd && echo run-ok")
    assert result.stdout.split() == ["pod-2", "run-ok"]
    assert inside.pod_exec("pod-2", "exit 3", check=False).returncode == 3
    with pytest.raises(subprocess.CalledProcessError):
        inside.pod_exec("pod-2", "false")
    with pytest.raises(SandboxError, match="no sandbox pod"):
        inside.pod_exec("pod-99", "true")


@live
def test_sshd_log_has_one_line_per_exec_request(box: Box) -> None:
    log = box.root / "pods/pod-3/sshd.log"
    pattern = re.compile(r"^Starting session: command for root from 127\.0\.0\.1 port \d+ id \d+$")
    before = inside.commands_served(box.root)["pod-3"]
    for _ in range(3):
        box.ssh("pod-3", "true")
    assert inside.commands_served(box.root)["pod-3"] == before + 3
    sessions = [line for line in log.read_text().splitlines() if inside.SESSION in line]
    assert len(sessions) == before + 3 and all(pattern.match(line) for line in sessions)


# --- a second sandbox, taken down -------------------------------------------------------


@live
def test_down_leaves_no_process_and_no_mount(
    box: Box, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "second"
    monkeypatch.setenv("PODSTATE_SANDBOX", str(root))
    with pytest.raises(SandboxError, match="disk size"):
        lifecycle.up(3, disk="lots")
    lifecycle.up(3, disk="64M")
    try:
        other = Box(root)
        assert other.ssh("pod-3", "df -B1 --output=size / | tail -n 1").stdout.strip() == str(
            64 << 20
        )
        assert not Path("/workspace").exists()
        sleeper = other.ssh("pod-1", "nohup sleep 600 >/dev/null 2>&1 & echo $!").stdout
        container.stop_pod("pod-2")
        assert [p.running for p in lifecycle.status()] == [True, False, True]
        with pytest.raises(SandboxError, match="not running"):
            inside.pod_exec("pod-2", "true")
        meta = json.loads((root / "sandbox.json").read_text())
        sleeper = host_pid(other.pods["pod-1"]["init_pid"], int(sleeper))  # the pod's own
        pids = [sleeper, meta["storage"]["pid"], meta["api"]["pid"]]
        for pod in other.pods.values():
            pids += [pod["pid"]] + ([pod["sshfs_pid"]] if pod.get("sshfs_pid") else [])
        assert len(pids) == 8

        lifecycle.down()

        assert [pid for pid in pids if not _gone(pid)] == []
        mounts = _host_mount_points()
        assert [m for m in mounts if m == str(root) or m.startswith(f"{root}/")] == []
        assert "/workspace" not in mounts
        assert not Path("/workspace").exists()
        assert not root.exists()
        assert lifecycle.status() == []
    finally:
        lifecycle.down()  # a second down is harmless; and a failed assertion leaks nothing
    assert box.ssh("pod-1", "hostname").stdout.strip() == "pod-1"  # the other sandbox is fine


def _sandbox_processes(root: Path) -> list[int]:
    """Return the live processes of the sandbox whose state directory is ``root``."""
    return [pid for pid, _ in marked(root)]


def _mounts_naming(root: Path) -> list[str]:
    """Return every mount, in any process's mount namespace, whose mountinfo line names a
    path in ``root`` (a pod's bind-mounted /workspace, its sshfs volume's directory, ...)."""
    found = []
    for info in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            lines = info.read_text().splitlines()
        except OSError:
            continue
        found += [f"{info.parent.name}: {line}" for line in lines if f"{root}/" in line]
    return found


@live
def test_down_stops_a_sandbox_whose_state_directory_was_deleted(box: Box, tmp_path: Path) -> None:
    root = tmp_path / "orphaned"
    env = {**os.environ, "PODSTATE_SANDBOX": str(root)}
    podstate = [str(Path(sys.executable).parent / "podstate"), "sandbox"]
    subprocess.run([*podstate, "up", "--pods", "2"], env=env, check=True, capture_output=True)
    orphan = Box(root)
    assert _mounts_naming(root)  # pod-1's sshfs /workspace, in pod-1's mount namespace
    sleeper = orphan.ssh("pod-1", "nohup sleep 600 >/dev/null 2>&1 & echo $!").stdout
    meta = json.loads((root / "sandbox.json").read_text())
    sleeper = host_pid(orphan.pods["pod-1"]["init_pid"], int(sleeper))  # the pod's own
    pids = [sleeper, meta["storage"]["pid"], meta["api"]["pid"]]
    pids += [pod["pid"] for pod in orphan.pods.values()] + [orphan.pods["pod-1"]["sshfs_pid"]]
    assert [pid for pid in pids if _gone(pid)] == []
    survivors = [pod["pid"] for pod in box.pods.values()] + _sandbox_processes(box.root)

    shutil.rmtree(root)
    assert not root.exists()
    assert (
        "already up"
        in subprocess.run(
            [*podstate, "up", "--pods", "1"], env=env, capture_output=True, text=True
        ).stderr
    )  # its processes still run: a second sandbox there would clash with them
    down = subprocess.run([*podstate, "down"], env=env, capture_output=True, text=True)

    assert (down.returncode, down.stderr) == (0, "")
    assert [pid for pid in pids if not _gone(pid)] == []
    assert _sandbox_processes(root) == []
    assert _mounts_naming(root) == []
    assert not root.exists()
    assert [pid for pid in survivors if _gone(pid)] == []  # the other sandbox is untouched
    assert box.ssh("pod-2", "hostname").stdout.strip() == "pod-2"
