"""Each sandbox pod counts its CPU and I/O in cgroups of its own, as a container does, and
sees them inside at its hierarchies' roots (podstate.sandbox.cgroups); the machine's
hierarchies are hidden from it. Two pods' counters never mix."""

from __future__ import annotations

from podstate.sandbox import cgroups

SANDBOX = {"pods": 2}
BURN = "i=0; while [ $i -lt 600000 ]; do i=$((i + 1)); done"  # a second of CPU or so


def _usage(fleet, pod: str) -> int:
    cpu, _ = cgroups.usage(fleet.state / "pods" / pod)
    assert cpu is not None
    return cpu


def test_a_pods_cpu_is_counted_in_its_own_cgroup_and_seen_inside_it(fleet):
    inside_before = int(fleet.out("pod-1", "cat /sys/fs/cgroup/cpuacct/cpuacct.usage"))
    before = {pod: _usage(fleet, pod) for pod in ("pod-1", "pod-2")}
    fleet.out("pod-1", BURN)
    after = {pod: _usage(fleet, pod) for pod in ("pod-1", "pod-2")}
    inside_after = int(fleet.out("pod-1", "cat /sys/fs/cgroup/cpuacct/cpuacct.usage"))
    spent = after["pod-1"] - before["pod-1"]
    assert spent > 100_000_000  # the loop's CPU, in nanoseconds, is pod-1's
    assert after["pod-2"] - before["pod-2"] < spent / 2  # and not pod-2's
    assert inside_after - inside_before >= spent  # the pod reads its own at the root


def test_a_pod_sees_no_hierarchy_but_its_own(fleet):
    assert fleet.out("pod-1", "ls /sys/fs/cgroup").split() == sorted(cgroups.CONTROLLERS)
    tasks, _, listed = fleet.out(
        "pod-2",
        "while read -r p; do echo $p; done </sys/fs/cgroup/cpuacct/cgroup.procs; echo --; ls /proc",
    ).partition("--")
    assert tasks.split() and set(tasks.split()) <= set(listed.split())  # its own alone
