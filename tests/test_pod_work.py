"""End to end: the work a check costs the pod. Counts, never times: bench/ measures time.

On a real multi-GPU host each nvidia-smi call can take seconds. The probe asks it one
query per check: the topology and the CUDA version cannot change while the container runs,
so the first probe of a container keeps them on its container disk, keyed by the GPU count
and driver version, and later probes read them from there; a restarted container (its disk
wiped) or another driver reads them again. The probe starts at most ``CHECK_PROGRAMS``
programs on a converged GPU pod, counted with strace on the pod's sshd.

pod-4 is a COMMUNITY pod with two GPUs on NVLink: its profile has no P2P guard only while its
topology is read right, so a check that finds it converged has read the topology.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from podstate.sandbox import container, inside
from tests.e2e import apply, check

SANDBOX = {"pods": 4}
POD = "pod-4"
LIMIT = ("--limit", POD)
QUERY = "--query-gpu="
# Every program a check starts on pod-4, converged and probed before: sshd's re-exec for the
# connection, the login shell, sh, timeout and nvidia-smi for the GPU query (it started 46
# before the GPU cache), one stat for the disks (stat -f) and one for every path and file,
# one sha256sum for every record of what podstate made (the container disk's, the volume's):
# whether each file podstate wrote still holds it is compared on the pod, so no digest of it
# leaves the pod; and one tar of every file's content and one base64 of every value that is
# not plain (scripts/enc.sh's spool: it was one base64 each). The pod lock, which no run
# holds, is read without its mutex's flock, and the container's identity from what the
# container's first probe read of it (its tr; a restarted container's first probe starts it
# again). However many files are declared or processes run, the count does not grow with
# them (one grep more reads the environments of processes outside SSH sessions, all at once).
CHECK_PROGRAMS = 10
# The programs of the fold of a reconfigure (one env value changed): tests/test_fold_work.py
# counts them by the number of files a fold writes.
FOLD_PROGRAMS = 15


def _calls(run) -> list[str]:
    """Return the nvidia-smi calls on POD during ``run()`` (each one's arguments), after
    asserting that ``run()`` exited with 0."""
    before = len(inside.nvidia_smi_calls(POD))
    result = run()
    assert result.returncode == 0, result.stdout + result.stderr
    return [_kind(call) for call in inside.nvidia_smi_calls(POD)[before:]]


def _kind(call: str) -> str:
    return "query" if call.startswith(QUERY) else call


@pytest.fixture(scope="module")
def first_apply(fleet) -> list[str]:
    """The nvidia-smi calls of POD's first apply: the first probe of its container."""
    return _calls(lambda: apply(fleet, *LIMIT))


def test_the_first_probe_of_a_container_reads_topology_and_cuda(first_apply):
    assert first_apply == ["query", "", "topo -m"]


def test_a_second_check_runs_nvidia_smi_once(fleet, first_apply, tmp_path):
    report = tmp_path / "r.json"
    assert _calls(lambda: check(fleet, *LIMIT, "--json", str(report))) == ["query"]
    assert json.loads(report.read_text())["pods"][POD]["status"] == "ok"  # NVLink: no guard
    assert "NCCL_P2P_DISABLE" not in fleet.out(POD, "cat /etc/profile.d/podstate.sh")


def test_another_driver_reads_them_again(fleet, first_apply):
    inside.gpu_fault(POD, "old-driver")
    assert _calls(lambda: check(fleet, *LIMIT)) == ["query", "", "topo -m"]
    assert _calls(lambda: check(fleet, *LIMIT)) == ["query"]


def test_a_check_starts_few_programs(fleet, first_apply):
    check(fleet, *LIMIT)  # the container has been probed before
    with inside.programs_started(POD) as started:
        result = check(fleet, *LIMIT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert started.count("/usr/local/bin/nvidia-smi") == 1
    assert len(started) <= CHECK_PROGRAMS, started


@pytest.mark.parametrize("count", [1, 20, 200])
def test_the_count_does_not_grow_with_the_files(fleet, first_apply, count):
    """1, 20 or 200 declared files, each a file podstate wrote and recorded: the probe reads
    them all with the same programs (one stat, one tar for their contents, one sha256sum for
    the records)."""
    files = {f"/root/podstate-counted/{i}.txt": {"content": f"file {i}\n"} for i in range(count)}
    fleet.host_vars(POD, {"files": files})
    try:
        result = apply(fleet, *LIMIT)
        assert result.returncode == 0, result.stdout + result.stderr
        check(fleet, *LIMIT)
        with inside.programs_started(POD) as started:
            result = check(fleet, *LIMIT)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        fleet.host_vars(POD, None)
        apply(fleet, *LIMIT)
    assert started.count("/usr/local/bin/nvidia-smi") == 1
    assert len(started) <= CHECK_PROGRAMS, started


MARKER = "podstate-counted-process"


def test_the_count_does_not_grow_with_the_processes(fleet, first_apply):
    """200 more processes on the pod (each a shell, not a name the probe passes over, with
    a child): the probe reads every one's environment with the same programs (one grep, in
    the spool, for all of them) and their counters with the shell's own read."""
    started_pids = fleet.out(
        POD,
        f"for i in $(seq 200); do setsid sh -c 'sleep 100000; : {MARKER}'"
        " </dev/null >/dev/null 2>&1 & echo $!; done",
    ).split()
    assert len(started_pids) == 200
    try:
        check(fleet, *LIMIT)  # the pod's idle period begins again: new processes
        with inside.programs_started(POD) as started:
            result = check(fleet, *LIMIT)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:  # each by its process group (setsid: the shell's own pid), never by a name
        fleet.out(POD, "kill -- " + " ".join(f"-{pid}" for pid in started_pids) + " || :")
    names = [path.rsplit("/", 1)[-1] for path in started]
    assert names.count("grep") == 1, names
    assert len(started) <= CHECK_PROGRAMS + 1, started


def test_a_restarted_container_reads_them_again(fleet, first_apply, tmp_path):
    container.restart(POD)
    env = fleet.api_env(tmp_path / "hostkeys")  # the API vouches for the new host key
    run = lambda: check(fleet, *LIMIT, env=env)  # noqa: E731
    calls = [_kind(c) for c in _after_restart(run)]
    assert calls == ["query", "", "topo -m"]
    assert _calls(lambda: apply(fleet, *LIMIT, env=env)) == ["query"]


def _after_restart(run) -> list[str]:
    """Return the nvidia-smi calls of ``run()`` on a just-restarted POD (whose list of calls
    starts again); ``run()`` reports the pod restarted (exit status 2)."""
    assert inside.nvidia_smi_calls(POD) == []
    result = run()
    assert result.returncode == 2, result.stdout + result.stderr
    return inside.nvidia_smi_calls(POD)


def test_the_fold_of_a_change_starts_no_program_to_renew_the_pod_lock(fleet, first_apply, tmp_path):
    """An apply of one changed env value, its fold three steps: flock to take the pod lock
    (the probe reads it free without one), and no program for the lock's clock
    (scripts/lock.sh keeps the boot's time) or to release it (a lock this command took to
    release, which no other run may touch before it expires); no step starts one to renew
    it, since the take made it valid for each step already."""
    fleet.host_vars(POD, {"env": {"PODSTATE_FOLD_COUNTED": "1"}})
    try:
        env = fleet.api_env(tmp_path / "hostkeys")  # its host key: a test before restarts it
        with inside.programs_started(POD) as probed:
            result = check(fleet, *LIMIT, env=env)
        assert result.returncode == 2, result.stdout + result.stderr  # the change to make
        with inside.programs_started(POD) as started:
            result = apply(fleet, *LIMIT, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "PODSTATE_FOLD_COUNTED" in fleet.out(POD, "cat /etc/profile.d/podstate.sh")
    finally:
        fleet.host_vars(POD, None)
        apply(fleet, *LIMIT)
    names = [path.rsplit("/", 1)[-1] for path in started]
    assert names.count("flock") == 1, names
    assert names.count("date") == 0, names
    fold = Counter(names) - Counter(path.rsplit("/", 1)[-1] for path in probed)
    assert fold.total() <= FOLD_PROGRAMS, fold  # the apply less the check: its fold


def test_the_speed_page_names_the_checks_program_count():
    from pathlib import Path

    text = " ".join((Path(__file__).parents[1] / "docs" / "speed.md").read_text().split())
    assert f"A check of a converged sandbox GPU pod starts {CHECK_PROGRAMS} programs" in text
