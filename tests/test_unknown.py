"""End to end: an unknown reading never lowers safety. Fresh COMMUNITY pods with two GPUs
whose nvidia-smi fails, or rejects a field the probe asks, get both NCCL guards from their
first apply; a rejected field leaves only its own reading unknown.

``inside.gpu_fault`` sets the faults before any apply (podstate.sandbox.shapes.GPU_FAULTS):
pod-1 (2 GPUs over PCIe) has an nvidia-smi that does not know one field, and GPU 1 in
thermal slowdown; pod-4 (2 GPUs on NVLink, which alone would need no P2P guard) has an
nvidia-smi that fails to initialize NVML.
"""

import json

import pytest

from podstate.sandbox import inside
from tests.e2e import apply, check, exec_count

SANDBOX = {"pods": 4}
PODS = ["pod-1", "pod-4"]
LIMIT = ["--limit", "pod-1", "--limit", "pod-4"]
PROFILE = "/etc/profile.d/podstate.sh"
REJECTED = "clocks_throttle_reasons.hw_slowdown"


@pytest.fixture(scope="module")
def first_apply(fleet):
    """The first apply of the faulty pods: (the run, remote commands per pod)."""
    inside.gpu_fault("pod-1", "unknown-field")
    inside.gpu_fault("pod-1", "thermal", index=1)
    inside.gpu_fault("pod-4", "nvml-unknown")
    for pod in PODS:
        fleet.host_vars(pod, {"gpu": {"count": 2, "healthy": True}})
    assert fleet.ssh("pod-4", "test -e /etc/profile.d/podstate.sh").returncode == 1  # fresh
    before = {pod: exec_count(fleet, pod) for pod in PODS}
    run = apply(fleet, *LIMIT)
    return run, {pod: exec_count(fleet, pod) - before[pod] for pod in PODS}


@pytest.mark.parametrize("pod", PODS)
def test_first_apply_sets_both_nccl_guards(fleet, first_apply, pod):
    profile = fleet.out(pod, f"cat {PROFILE}")
    assert "export NCCL_P2P_DISABLE=1" in profile and "export NCCL_IB_DISABLE=1" in profile
    assert fleet.out(pod, 'echo "$NCCL_P2P_DISABLE|$NCCL_IB_DISABLE"').strip() == "1|1"


def test_first_apply_still_takes_two_commands(first_apply):
    run, commands = first_apply
    assert commands == {"pod-1": 2, "pod-4": 2}
    assert run.returncode == 1  # the GPU findings below fail both pods
    assert "[pod-1] Success" in run.stderr and "[pod-4] Success" in run.stderr
    assert "[pod-1] violation: gpu.healthy: GPU 1 " in run.stderr
    assert "[pod-4] violation: gpu.unreadable: nvidia-smi fails on this pod" in run.stderr


@pytest.fixture(scope="module")
def report(fleet, first_apply, tmp_path_factory):
    """The drift check after the first apply: each pod's violations, by finding id."""
    out = tmp_path_factory.mktemp("unknown") / "r.json"
    result = check(fleet, "--json", str(out), "--limit", "pod-1", "--limit", "pod-4")
    assert out.exists(), result.stdout + result.stderr
    return {
        pod: {v["id"]: v["message"] for v in found["violations"]}
        for pod, found in json.loads(out.read_text())["pods"].items()
    }


def test_a_rejected_field_leaves_only_its_reading_unknown(report):
    assert list(report["pod-1"]) == ["gpu.healthy"]  # 2 GPUs read: no gpu.count, readable
    message = report["pod-1"]["gpu.healthy"]
    assert message.startswith(
        "GPU 1 (NVIDIA GeForce RTX 4090): hardware thermal slowdown active at 91 °C"
    )
    assert f"does not know the field {REJECTED} " in message
    assert "GPU 0" not in message


def test_an_nvidia_smi_that_fails_is_unreadable(report):
    assert list(report["pod-4"]) == ["gpu.unreadable"]
    assert "Failed to initialize NVML: Unknown Error" in report["pod-4"]["gpu.unreadable"]
    assert "NCCL_P2P_DISABLE=1" in report["pod-4"]["gpu.unreadable"]


def test_the_guards_stay_and_nothing_more_changes(fleet, first_apply, report):
    again = apply(fleet, *LIMIT)
    assert again.returncode == 1
    assert "[pod-1] Success" not in again.stderr and "[pod-4] Success" not in again.stderr
    for pod in PODS:
        assert fleet.out(pod, 'echo "$NCCL_P2P_DISABLE|$NCCL_IB_DISABLE"').strip() == "1|1"
