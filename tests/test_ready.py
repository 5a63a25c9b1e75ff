"""End to end: the ready marker, ``podstate wait``, ``podstate-ready`` on the pod, and a pod
named *restarted* when its container disk lost what podstate made while its volume kept the
record of the apply."""

from __future__ import annotations

import json
import subprocess

import jsonschema
import pytest

from podstate.sandbox import container, ssh
from tests.e2e import BIN, ROOT, apply, check, junit_errors

SANDBOX = {"pods": 2}
REPORT_SCHEMA = json.loads((ROOT / "schema/check-report.schema.json").read_text())
MARKER = "/etc/podstate/ready"
RECORD = "/workspace/.podstate/applied"
# What a restart wipes: the container disk (the sandbox's own restart is tested elsewhere).
WIPE = "rm -rf /etc/podstate /etc/profile.d/podstate.sh /usr/local/bin/podstate-ready"


def report(fleet, tmp_path, *args):
    out, xml, md = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md"
    result = check(fleet, "--json", str(out), "--junit", str(xml), "--markdown", str(md), *args)
    assert "Traceback" not in result.stdout + result.stderr
    document = json.loads(out.read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    assert junit_errors(xml) == []
    return result, document, xml.read_text(), md.read_text()


def wait(fleet, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "podstate"), "wait", "--interval", "1", *args],
        cwd=ROOT,
        env=fleet.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def fresh(fleet):
    for pod in fleet.pods:
        fleet.host_vars(pod, {"shm": {"min_size": "32M"}})
    return fleet


def test_a_pod_never_applied_to_is_not_ready_and_not_restarted(fresh, tmp_path):
    result, document, _, _ = report(fresh, tmp_path)
    assert result.returncode == 2
    for pod in fresh.pods:
        entry = document["pods"][pod]
        assert entry["status"] == "drift" and entry["restarted"] is None
        assert entry["ready"] is False
        assert {"role": "Ready", "operation": "Ready marker", "file": "deploy/pod.py"} in entry[
            "changes"
        ]
    assert document["format_version"] == 6
    waiting = wait(fresh, "--timeout", "0")
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 1
    assert out.splitlines() == [
        "2 of 2 not ready after 0 s:",
        "  pod-1: no apply of this desired state has succeeded on it yet",
        "  pod-2: no apply of this desired state has succeeded on it yet",
    ]


def test_an_apply_leaves_the_marker_and_the_record_and_wait_returns(fresh, tmp_path):
    run = apply(fresh)
    assert run.returncode == 0, run.stderr
    for pod in fresh.pods:
        marker = json.loads(fresh.out(pod, f"cat {MARKER}"))
        record = json.loads(fresh.out(pod, f"cat {RECORD}"))
        assert marker["digest"] == record["digest"] and len(marker["digest"]) == 64
        assert record["pod"] == pod and record["applied_at"] == marker["applied_at"]
        assert fresh.out(pod, f"stat -c %a {RECORD}") == "600\n"
        assert fresh.ssh(pod, "podstate-ready").returncode == 0
        assert fresh.ssh(pod, "bash -lc podstate-ready").returncode == 0
    result, document, _, _ = report(fresh, tmp_path)
    assert result.returncode == 0, result.stdout
    assert all(document["pods"][pod]["ready"] for pod in fresh.pods)
    waiting = wait(fresh, "--timeout", "60")
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and out == "2 of 2 ready\n"
    again = apply(fresh)  # converged: the marker is not written again
    assert again.returncode == 0 and again.hosts("success") == set()


def test_a_wiped_container_disk_is_a_restart_until_the_next_apply(fresh, tmp_path):
    assert apply(fresh).returncode == 0
    applied_at = json.loads(fresh.out("pod-1", f"cat {RECORD}"))["applied_at"]
    fresh.out("pod-1", WIPE)
    result, document, xml, md = report(fresh, tmp_path)
    assert result.returncode == 2
    entry = document["pods"]["pod-1"]
    assert entry["status"] == "restarted" and entry["ready"] is False
    assert entry["restarted"] == {"applied_at": applied_at, "since": None}
    assert {c["operation"] for c in entry["changes"]} >= {"Ready marker"}
    assert document["pods"]["pod-2"]["status"] == "ok"
    assert document["summary"]["restarted"] == 1
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("pod-1"))
    assert "restarted" in line and f"after podstate applied at {applied_at}" in line
    assert 'name="Restart"' in xml and 'type="restarted"' in xml
    assert "| pod-1 | restarted | container re-created" in md
    # a job on the pod waits for it, by the volume's copy of podstate-ready
    job = subprocess.Popen(
        ssh.ssh_command("pod-1") + ["/workspace/.podstate/bin/podstate-ready --wait 300"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    short = fresh.ssh("pod-1", "/workspace/.podstate/bin/podstate-ready --wait 1")
    assert short.returncode == 1
    assert short.stderr.strip() == (
        "podstate-ready: not ready after 1 s: no podstate apply has succeeded since this "
        "container started"
    )
    waiting = wait(fresh, "--timeout", "300")
    assert waiting.stdout.readline() == "1 of 2 ready\n"  # pod-2; pod-1 is not
    assert job.poll() is None  # not ready before the apply
    run = apply(fresh)
    assert run.returncode == 0, run.stderr
    assert job.wait(timeout=120) == 0
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and out == "2 of 2 ready\n"
    result, document, _, _ = report(fresh, tmp_path)
    assert result.returncode == 0 and document["pods"]["pod-1"]["restarted"] is None


def test_a_marker_of_another_desired_state_is_not_ready(fresh, tmp_path):
    assert apply(fresh).returncode == 0
    fresh.host_vars("pod-2", {"shm": {"min_size": "32M"}, "env": {"NEW_VALUE": "1"}})
    try:
        waiting = wait(fresh, "--timeout", "0")
        out, _ = waiting.communicate(timeout=120)
        assert waiting.returncode == 1
        assert "  pod-2: no apply of this desired state has succeeded on it yet" in out
    finally:
        fresh.host_vars("pod-2", {"shm": {"min_size": "32M"}})


def test_a_pod_with_a_violation_gets_no_marker(fresh):
    fresh.out("pod-1", WIPE)
    fresh.host_vars("pod-1", {"shm": {"min_size": "64T"}})
    try:
        run = apply(fresh)
        assert run.returncode == 1
        assert fresh.ssh("pod-1", f"test -e {MARKER}").returncode == 1
        assert fresh.ssh("pod-2", f"test -s {MARKER}").returncode == 0
    finally:
        fresh.host_vars("pod-1", {"shm": {"min_size": "32M"}})


def started_at(fleet, pod: str) -> str:
    return json.loads((fleet.state / "pods.json").read_text())[pod]["started_at"]


def test_a_real_restart_is_named_with_runpods_start_time_and_put_back(fresh, tmp_path):
    """``sandbox restart`` wipes the container disk and makes a new host key: through the
    sandbox's RunPod API, whose startedAt vouches for it, the check names the restart and
    its time, and an apply puts the pod back; a marker from before is never taken."""
    store = tmp_path / "hostkeys"
    env = fresh.api_env(store)
    first = apply(fresh, env=env)
    assert first.returncode == 0, first.stderr
    assert fresh.ssh("pod-1", f"test -s {MARKER}").returncode == 0
    container.restart("pod-1")
    assert fresh.ssh("pod-1", f"test -e {MARKER}").returncode == 1  # wiped with the disk
    out = tmp_path / "r.json"
    result = check(fresh, "--json", str(out), env=env)
    document = json.loads(out.read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    assert result.returncode == 2, result.stdout
    entry = document["pods"]["pod-1"]
    assert entry["status"] == "restarted" and entry["ready"] is False
    assert entry["restarted"]["since"] == started_at(fresh, "pod-1")
    assert entry["host_key"]["trust"] == "verified"  # the new key is in its start's log
    assert document["pods"]["pod-2"]["status"] == "ok"
    waiting = wait(fresh, "--timeout", "0")
    waiting.communicate(timeout=120)
    assert waiting.returncode == 1  # not ready before the apply puts it back
    run = apply(fresh, env=env)
    assert run.returncode == 0, run.stderr
    assert fresh.ssh("pod-1", "bash -lc podstate-ready").returncode == 0
    result = check(fresh, "--json", str(out), env=env)
    assert result.returncode == 0, result.stdout


def test_with_a_pods_file_a_restarted_pods_new_key_is_refused_and_explained(fresh, tmp_path):
    assert apply(fresh, "--limit", "pod-2").returncode == 0  # pod-1 restarted above
    container.restart("pod-2")
    out = tmp_path / "r.json"
    result = check(fresh, "--json", str(out), "--limit", "pod-2")
    assert result.returncode == 1
    error = json.loads(out.read_text())["pods"]["pod-2"]["error"]
    assert error.startswith("host key refused: it changed since it was recorded.")
    assert "A restart explains that" in error and "ssh-keygen -f" in error
    assert fresh.ssh("pod-2", "test -e /etc/podstate").returncode == 1  # nothing touched
