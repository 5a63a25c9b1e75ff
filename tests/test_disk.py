"""A full container disk, or one with less free than disk_reserve where the desired state puts
scratch and caches, is a violation, and the pod is left exactly as it was."""

import pytest

from tests.e2e import apply

SANDBOX = {"pods": 2, "disk": "512M"}
RESERVE = 256 << 20  # disk_reserve here: a 512M container disk starts well above it
FILES = "cat /etc/profile.d/podstate.sh ~/.bashrc"


@pytest.fixture(scope="module")
def converged(fleet):
    fleet.group_vars("all", {"disk_reserve": RESERVE}, merge=True)
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


def free_bytes(fleet, pod: str) -> int:
    """Return the bytes free on the pod's container disk, as the probe reads them."""
    return int(fleet.out(pod, "stat -f -c '%S %a' / | awk '{print $1 * $2}'").strip())


def test_disk_below_reserve_names_what_fills_it_and_changes_nothing(converged):
    fleet = converged
    keep = 160 << 20  # above the 64 MiB "full" mark, below disk_reserve
    filler = (free_bytes(fleet, "pod-1") - keep) >> 20
    fleet.out("pod-1", f"dd if=/dev/zero of=/filler bs=1M count={filler} 2>/dev/null")
    try:
        assert 64 << 20 < free_bytes(fleet, "pod-1") < RESERVE
        before = fleet.out("pod-1", FILES)
        wanted = {"env": {"RESERVED": "yes"}, "dirs": {"MORE_CACHE": "/scratch/more"}}
        fleet.host_vars("pod-1", wanted)
        fleet.host_vars("pod-2", wanted)
        run = apply(fleet)
        assert run.returncode == 1
        assert "less than disk_reserve 256M" in run.stderr
        assert "scratch /scratch" in run.stderr
        assert "TMPDIR=/scratch/tmp" in run.stderr and "MORE_CACHE=/scratch/more" in run.stderr
        assert "podstate changed nothing on this pod" in run.stderr
        assert run.hosts("error") == {"pod-1"}
        assert fleet.out("pod-1", FILES) == before
        assert fleet.ssh("pod-1", "test -e /scratch/more").returncode == 1
        assert "RESERVED=yes" in fleet.out("pod-2", "cat /etc/profile.d/podstate.sh")
        assert fleet.out("pod-2", "echo $MORE_CACHE; test -d /scratch/more").strip() == (
            "/scratch/more"
        )
    finally:
        fleet.out("pod-1", "rm -f /filler")
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-1", "echo $RESERVED").strip() == "yes"


# A stat that cannot read any filesystem's free space (``stat -f``); the rest is stat's own.
BLIND_STAT = '#!/bin/sh\n[ "$1" = -f ] && exit 1\nexec /usr/bin/stat "$@"\n'


def test_free_space_that_cannot_be_read_is_unknown_and_changes_nothing(converged):
    fleet = converged
    fake = "/usr/local/bin/stat"
    fleet.out("pod-1", f"cat > {fake} && chmod +x {fake}", BLIND_STAT.encode())
    try:
        assert fleet.ssh("pod-1", "stat -f /").returncode == 1
        before = fleet.out("pod-1", FILES)
        fleet.host_vars("pod-1", {"env": {"UNSEEN": "yes"}})
        fleet.host_vars("pod-2", {"env": {"UNSEEN": "yes"}})
        run = apply(fleet)
        assert run.returncode == 1
        assert (
            "[pod-1] violation: disk.unreadable: the free space of the container disk (/) "
            "cannot be read" in run.stderr
        )
        assert "podstate changed nothing on this pod" in run.stderr
        assert run.hosts("error") == {"pod-1"}
        assert fleet.out("pod-1", FILES) == before
        assert "UNSEEN=yes" in fleet.out("pod-2", "cat /etc/profile.d/podstate.sh")
    finally:
        fleet.out("pod-1", f"rm -f {fake}")
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-1", "echo $UNSEEN").strip() == "yes"
