"""End to end: pyinfra converges sandbox pods over real SSH, and a second run is quiet.

Sandbox shapes (podstate.sandbox.shapes.SHAPES): pod-1 COMMUNITY 2 GPUs over PCIe, sshfs
/workspace; pod-2 SECURE 8 GPUs NVLink; pod-3 COMMUNITY 1 GPU with a 64 MiB /dev/shm;
pod-4 COMMUNITY 2 GPUs NVLink, privileged, 8 GiB /dev/shm; pod-5 SECURE, no GPU, sshfs.
"""

import socket

import pytest
import yaml

from tests.e2e import apply

HEALTHY = ["pod-1", "pod-2", "pod-4", "pod-5"]
SHELLS = {
    "ssh pod CMD": "{}",
    "bash -lc": "bash -lc '{}'",
    "bash -ic": "bash -ic '{}' 2>/dev/null",
}


@pytest.fixture(scope="module")
def converged(fleet):
    """The first apply, with the shipped group_vars."""
    fleet.host_vars("pod-1", None)
    return apply(fleet)


def test_first_apply_fails_only_the_small_shm_pod(converged):
    assert converged.returncode == 1
    assert converged.hosts("error") == {"pod-3"}
    assert "/dev/shm is 64M, below the minimum 16G" in converged.stderr
    assert "Bus error" in converged.stderr


def test_first_apply_changed_every_pod(converged):
    assert converged.hosts("success") == set(HEALTHY) | {"pod-3"}


@pytest.mark.parametrize("pod", HEALTHY + ["pod-3"])
@pytest.mark.parametrize("shell", SHELLS)
def test_every_shell_kind_sees_the_profile(fleet, converged, pod, shell):
    command = SHELLS[shell].format('echo "$TMPDIR|$PIP_CACHE_DIR|$UV_CACHE_DIR|$PYTHONUNBUFFERED"')
    assert fleet.out(pod, command).strip().splitlines()[-1] == (
        "/scratch/tmp|/scratch/pip|/scratch/uv|1"
    )


def test_profile_wins_over_rp_environment_in_interactive_shells(fleet, converged):
    assert "/workspace/.cache/pip" in fleet.out("pod-1", "cat /etc/rp_environment")
    assert fleet.out("pod-1", "bash -ic 'echo $PIP_CACHE_DIR' 2>/dev/null").strip() == (
        "/scratch/pip"
    )


@pytest.mark.parametrize("pod", HEALTHY)
def test_dirs_exist_and_tmpdir_is_sticky(fleet, converged, pod):
    assert fleet.out(pod, "stat -c %a /scratch/tmp").strip() == "1777"
    assert fleet.out(pod, "test -d /scratch/pip && test -d /scratch/uv && echo ok")


def test_scratch_is_tmpfs_where_the_pod_may_mount(fleet, converged):
    assert fleet.out("pod-4", "stat -f -c %T /scratch").strip() == "tmpfs"
    assert fleet.out("pod-4", "df -B1 --output=size /scratch | tail -1").strip() == str(16 << 30)


def test_scratch_is_a_local_directory_where_it_may_not(fleet, converged):
    assert fleet.out("pod-1", "stat -f -c %T /scratch").strip() not in ("tmpfs", "fuseblk")
    assert fleet.out("pod-1", "stat -c %a /scratch").strip() == "1777"
    assert "as local-disk directory" in converged.stderr + converged.stdout


def test_shm_is_grown_where_the_pod_may_remount(fleet, converged):
    assert fleet.out("pod-4", "df -B1 --output=size /dev/shm | tail -1").strip() == str(16 << 30)


@pytest.mark.parametrize(
    "pod,p2p,ib",
    [
        ("pod-1", "1", "1"),
        ("pod-2", "", ""),
        ("pod-3", "", "1"),
        ("pod-4", "", "1"),
        ("pod-5", "", ""),
    ],
)
def test_nccl_guards_follow_cloud_and_topology(fleet, converged, pod, p2p, ib):
    assert fleet.out(pod, 'echo "$NCCL_P2P_DISABLE|$NCCL_IB_DISABLE"').strip() == f"{p2p}|{ib}"
    profile = fleet.out(pod, "cat /etc/profile.d/podstate.sh")
    assert ("NCCL_P2P_DISABLE" in profile) is bool(p2p)


def test_second_apply_changes_nothing(fleet, converged):
    again = apply(fleet)
    assert again.hosts("success") == set()
    assert again.hosts("error") == {"pod-3"}
    assert again.returncode == 1


@pytest.fixture(scope="module")
def dry_plan(fleet, converged) -> set[tuple[str, str]]:
    """The changes (operation, pod) that ``pyinfra --dry`` plans for the converged fleet."""
    plan = apply(fleet, dry=True)
    assert plan.returncode == 0, plan.stderr
    return {(op["name"], h) for op in plan.json["plan"] for h in op["hosts_with_change"]}


def test_dry_plan_of_converged_fleet_has_no_change(dry_plan):
    """Drift would show here: a hand edit of the profile is its operation's change."""
    assert dry_plan <= {("Report what apply cannot fix", "pod-3")}


def test_dry_plan_of_converged_fleet_has_no_change_but_the_violation(dry_plan):
    # The last operation, which fails pod-3 with its violation, is the plan's one change.
    assert dry_plan == {("Report what apply cannot fix", "pod-3")}


def test_removed_variable_disappears_and_workspace_dir_is_a_violation(fleet, converged):
    fleet.host_vars("pod-1", {"dirs": {"HF_HOME": "/workspace/hf"}, "env": {"ONLY_HERE": "x"}})
    run = apply(fleet, "--limit", "pod-1")
    assert run.returncode == 1
    assert "dirs.HF_HOME = /workspace/hf is on the network filesystem fuse.sshfs" in run.stderr
    assert fleet.out("pod-1", "echo $HF_HOME").strip() == "/workspace/hf"
    fleet.host_vars("pod-1", None)
    run = apply(fleet, "--limit", "pod-1")
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-1", 'echo "[$ONLY_HERE]"').strip() == "[]"
    assert "ONLY_HERE" not in fleet.out("pod-1", "cat /etc/profile.d/podstate.sh")


def test_unreachable_pod_is_named_and_the_others_converge(fleet, converged, tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    doc = yaml.safe_load(fleet.pods_file.read_text())
    doc["pods"]["gone-1"] = {"ssh_hostname": "127.0.0.1", "ssh_port": port}
    pods_file = tmp_path / "pods.yaml"
    pods_file.write_text(yaml.safe_dump(doc))
    run = apply(fleet, pods_file=pods_file)
    assert run.returncode == 1
    assert "gone-1" in run.stderr
    assert run.hosts("no_change") >= set(HEALTHY)
