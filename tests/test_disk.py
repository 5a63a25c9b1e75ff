"""A full container disk is a violation, and the pod is left exactly as it was."""

import pytest

from tests.e2e import apply

SANDBOX = {"pods": 2, "disk": "128M"}
FILES = "cat /etc/profile.d/podstate.sh ~/.bashrc"


@pytest.fixture(scope="module")
def converged(fleet):
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    return fleet


def test_full_disk_is_a_violation_and_changes_nothing(converged):
    fleet = converged
    before = fleet.out("pod-1", FILES)
    fleet.out("pod-1", "dd if=/dev/zero of=/filler bs=1M 2>/dev/null; true")
    assert int(fleet.out("pod-1", "stat -f -c %a /").strip()) < 1024
    fleet.host_vars("pod-1", {"env": {"NEW": "value"}})
    fleet.host_vars("pod-2", {"env": {"NEW": "value"}})
    run = apply(fleet)
    assert run.returncode == 1
    assert "the container disk (/) is full" in run.stderr
    assert "podstate changed nothing on this pod" in run.stderr
    assert fleet.out("pod-1", FILES) == before
    assert run.hosts("error") == {"pod-1"}
    assert "NEW=value" in fleet.out("pod-2", "cat /etc/profile.d/podstate.sh")


def test_freed_disk_converges(converged):
    fleet = converged
    fleet.out("pod-1", "rm -f /filler")
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-1", "echo $NEW").strip() == "value"
