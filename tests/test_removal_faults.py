"""Removal's faults, on a sandbox pod: a record podstate cannot use stops every removal and
says why; a run killed halfway through a removal leaves each item as before or as after,
and the next run finishes the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from podstate.facts.made import MADE, parse_record
from podstate.sandbox.state import load_pods
from tests.e2e import apply, check, start_apply

SANDBOX = {"pods": 1}
FILES = {f"/etc/rm-fault/{name}": {"content": f"{name}\n"} for name in "abc"}
BASE = {"shm": {"min_size": "32M"}}


def _report(fleet, tmp_path: Path) -> dict:
    out = tmp_path / "r.json"
    result = check(fleet, "--json", str(out))
    assert out.exists(), result.stderr
    return json.loads(out.read_text())["pods"]["pod-1"]


def _contents(fleet) -> dict[str, str | None]:
    """Return what each of FILES holds on the pod, None where it is gone."""
    found = {}
    for path in FILES:
        result = fleet.ssh("pod-1", f"cat {path}")
        found[path] = result.stdout if result.returncode == 0 else None
    return found


@pytest.fixture
def made_files(fleet):
    """pod-1 with FILES applied, then taken out of the desired state (not applied yet)."""
    fleet.group_vars("all", {**BASE, "files": FILES})
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    fleet.group_vars("all", BASE)
    return fleet


@pytest.mark.parametrize(
    "damage, why",
    [
        ("sed -i 's/^podstate-made 1$/podstate-made 9/' {record}", "from a newer podstate"),
        (
            "sed -i 's/^pod \\([^ ]*\\) .*$/pod \\1 =someone-else/' {volume}",
            "another pod's",
        ),
        ("rm {record} && mkdir {record}", "podstate cannot read it"),
    ],
)
def test_a_record_podstate_cannot_use_removes_nothing_and_says_why(
    made_files, tmp_path, damage, why
):
    fleet = made_files
    volume = (
        "/workspace/.podstate/made/" + fleet.out("pod-1", "ls /workspace/.podstate/made").strip()
    )
    fleet.out("pod-1", f"cp -a {MADE} /tmp/made.kept && cp -a {volume} /tmp/made.volume")
    fleet.out("pod-1", damage.format(record=MADE, volume=volume))
    try:
        entry = _report(fleet, tmp_path)
        assert entry["status"] == "violation"
        [violation] = [v for v in entry["violations"] if v["id"] == "removal.record"]
        assert why in violation["message"] and "removes nothing" in violation["message"]
        assert not [c for c in entry["changes"] if c["operation"].startswith("would remove")]
        run = apply(fleet)
        assert run.returncode == 1 and "removal.record" in run.stderr
        assert _contents(fleet) == {path: item["content"] for path, item in FILES.items()}
    finally:
        fleet.out("pod-1", f"rm -rf {MADE} && mv /tmp/made.kept {MADE}")
        fleet.out("pod-1", f"mv /tmp/made.volume {volume}")
    assert apply(fleet).returncode == 0
    assert set(_contents(fleet).values()) == {None}


def _process(command: str) -> int:
    """Return the pid of the process (of this machine, where sandbox pods run) whose command
    line is ``command``, once there is one: the event the test waits for."""
    wanted = command.encode().replace(b" ", b"\0") + b"\0"
    while True:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if (entry / "cmdline").read_bytes() == wanted:
                        return int(entry.name)
                except OSError:
                    continue
        time.sleep(0.01)


def test_a_run_killed_halfway_through_a_removal_is_finished_by_the_next(made_files, tmp_path):
    fleet = made_files
    middle = "/etc/rm-fault/b"  # removed after c, before a (what is in a directory first)
    # The removal of b is held at its unlink (strace, attached to the pod's sshd, delays the
    # call), so the run is killed there and nowhere else.
    tracer = subprocess.Popen(
        ["strace", "-f", "-p", str(load_pods()["pod-1"]["sshd_pid"]), "-P", middle,
         "-e", "trace=unlink,unlinkat", "-e", "inject=unlink,unlinkat:delay_enter=600000000",
         "-e", "signal=none", "-o", "/dev/null"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert "attached" in (tracer.stderr.readline() if tracer.stderr else "")
        run = start_apply(fleet)
        rm = _process(f"rm -f -- {middle}")
        run.kill()  # the run dies halfway through the removal: the real kill
        run.communicate()
        os.kill(rm, signal.SIGKILL)  # and the removal of b with it
    finally:
        tracer.kill()
        tracer.communicate()
    found = _contents(fleet)
    assert found["/etc/rm-fault/c"] is None  # after
    assert found[middle] == "b\n" and found["/etc/rm-fault/a"] == "a\n"  # before
    left = parse_record(fleet.out("pod-1", f"cat {MADE}")).entries
    assert {middle, "/etc/rm-fault/a"} <= set(left)  # the record names what is left

    run = apply(fleet, env={**fleet.env(), "PODSTATE_LOCK_WAIT": "120"})
    assert run.returncode == 0, run.stderr
    assert set(_contents(fleet).values()) == {None}
    assert fleet.ssh("pod-1", "test -e /etc/rm-fault").returncode == 1
    assert not [p for p in parse_record(fleet.out("pod-1", f"cat {MADE}")).entries if "rm-" in p]
    entry = _report(fleet, tmp_path)
    assert entry["status"] == "ok", entry


def test_a_file_the_user_replaced_is_left_as_it_is_and_named_once(made_files, tmp_path):
    fleet = made_files
    fleet.out("pod-1", "echo theirs > /etc/rm-fault/a")
    try:
        changes = [c["operation"] for c in _report(fleet, tmp_path)["changes"]]
        assert (
            "would forget: /etc/rm-fault/a holds what podstate did not write: left as it is"
            in changes
        )
        assert "would remove: /etc/rm-fault/b" in changes
        assert apply(fleet).returncode == 0
        assert _contents(fleet) == {
            "/etc/rm-fault/a": "theirs\n",
            "/etc/rm-fault/b": None,
            "/etc/rm-fault/c": None,
        }
        assert _report(fleet, tmp_path)["status"] == "ok"  # named once
    finally:
        fleet.out("pod-1", "rm -rf /etc/rm-fault")
