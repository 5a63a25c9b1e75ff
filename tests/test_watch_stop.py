"""End to end: ``podstate watch`` stops the pods idle past ``idle.after``, on sandbox pods
listed by the sandbox's RunPod API (which answers ``POST /v2/pods/{id}/action`` and writes
each request to its actions log): exactly once, never one in use or held, none in a dry run.

Passes are counted (``--passes``), never timed; ``after`` is one second, which the first
pass's check of the fleet outlasts.
"""

from __future__ import annotations

import json
import subprocess

from podstate.sandbox import inside
from podstate.sandbox.api import ACTIONS_LOG, list_pods
from tests.e2e import BIN, ROOT, Fleet

SANDBOX = {"pods": 3}
STOP = {"idle": {"after": "1s", "action": "stop"}}


def watch(
    fleet: Fleet,
    tmp_path,
    *args: str,
    state: str = "watch.json",
    env: dict[str, str] | None = None,
) -> list[dict]:
    """Run ``podstate watch --json`` on the API's pods (or those ``env`` lists), every pass a
    check, with the state file ``state``; return its events."""
    result = subprocess.run(
        [str(BIN / "podstate"), "watch", "--json", "--interval", "0.1", "--check-every", "1"]
        + ["--state", str(tmp_path / state), *args],
        cwd=ROOT,
        env=env or fleet.api_env(tmp_path / "hostkeys"),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def stops(fleet: Fleet) -> list[str]:
    path = fleet.state / ACTIONS_LOG
    return path.read_text().splitlines() if path.exists() else []


def test_only_the_idle_pod_is_stopped_once_and_a_dry_run_stops_none(fleet: Fleet, tmp_path):
    ids = {pod["name"]: pod["id"] for pod in list_pods(fleet.state)["pods"]}
    fleet.host_vars("pod-1", STOP)  # idle
    fleet.host_vars("pod-2", {**STOP, "watch": {"hold": True}})  # idle, held
    fleet.host_vars("pod-3", {**STOP, "shm": {"min_size": "32M"}})  # its GPU in use
    inside.gpu_busy("pod-3", 0, 87)

    dry = watch(fleet, tmp_path, "--passes", "2", "--dry-run")
    assert [e["pod"] for e in dry if e["result"] == "dry run"] == ["pod-1"]
    assert stops(fleet) == []

    events = watch(fleet, tmp_path, "--passes", "3")
    assert stops(fleet) == [f"stop {ids['pod-1']} 200"]
    (stopped,) = [e for e in events if e["action"] == "stop"]
    assert (stopped["pod"], stopped["result"]) == ("pod-1", "ok")
    assert stopped["idle_since"] and "saves $0.68/h" in stopped["detail"]
    # the held pod's idle stop is refused (its drift, also held, is logged apart)
    held = [
        e for e in events if e["pod"] == "pod-2" and e["result"] == "held" and e["seen"] == "idle"
    ]
    assert held and "not stopped: watch.hold in its vars" in held[0]["detail"], events
    assert not [e for e in events if e["pod"] == "pod-3" and e["seen"] == "idle"]
    status = {pod["name"]: pod["status"] for pod in list_pods(fleet.state)["pods"]}
    assert status == {"pod-1": "EXITED", "pod-2": "RUNNING", "pod-3": "RUNNING"}

    watch(fleet, tmp_path, "--passes", "2")  # a watch started again stops nothing more
    assert stops(fleet) == [f"stop {ids['pod-1']} 200"]
