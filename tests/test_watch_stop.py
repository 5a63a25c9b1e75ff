"""End to end: ``podstate watch`` stops the pods idle past ``idle.after``, on sandbox pods
listed by the sandbox's RunPod API (which answers ``POST /v2/pods/{id}/action`` and writes
each request to its actions log): exactly once, never one in use or held, none in a dry run.

A watch that must reach a stop runs until its events say it did (``Watching.through``):
how many passes a second of idle takes is the clock's, never the test's. One that must not
runs a counted number of passes (``--passes``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from podstate.sandbox import inside
from podstate.sandbox.api import ACTIONS_LOG, list_pods
from tests.e2e import BIN, ROOT, Fleet, Watching

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


def watch_through(
    fleet: Fleet, tmp_path, done: Callable[[list[dict]], bool], *args: str
) -> list[dict]:
    """Run ``podstate watch --json`` on the API's pods, every pass a check, until ``done``
    accepts its events (to the end of that pass); return them."""
    env = fleet.api_env(tmp_path / "hostkeys")
    state = ["--state", str(tmp_path / "watch.json")]
    watching = Watching(fleet, "--interval", "0.1", "--check-every", "1", *state, *args, env=env)
    try:
        return watching.through(done)
    finally:
        watching.stop()


def stopped(events: list[dict], result: str) -> list[str]:
    """Return the pods the events say were stopped (or, with ``result`` "dry run", would
    be)."""
    return [
        e["pod"] for e in events if e["pod"] and e["action"] == "stop" and e["result"] == result
    ]


def stops(fleet: Fleet) -> list[str]:
    path = fleet.state / ACTIONS_LOG
    return path.read_text().splitlines() if path.exists() else []


def test_only_the_idle_pod_is_stopped_once_and_a_dry_run_stops_none(fleet: Fleet, tmp_path):
    ids = {pod["name"]: pod["id"] for pod in list_pods(fleet.state)["pods"]}
    fleet.host_vars("pod-1", STOP)  # idle
    fleet.host_vars("pod-2", {**STOP, "watch": {"hold": True}})  # idle, held
    fleet.host_vars("pod-3", {**STOP, "shm": {"min_size": "32M"}})  # its GPU in use
    inside.gpu_busy("pod-3", 0, 87)

    dry = watch_through(fleet, tmp_path, lambda e: stopped(e, "dry run"), "--dry-run")
    assert set(stopped(dry, "dry run")) == {"pod-1"}
    assert stops(fleet) == []

    def held(events: list[dict]) -> list[dict]:  # the held pod's idle stop, refused
        return [
            e
            for e in events
            if e["pod"] == "pod-2" and e["result"] == "held" and e["seen"] == "idle"
        ]

    events = watch_through(fleet, tmp_path, lambda e: stopped(e, "ok") and held(e))
    assert stops(fleet) == [f"stop {ids['pod-1']} 200"]
    (stop,) = [e for e in events if e["pod"] and e["action"] == "stop"]
    assert (stop["pod"], stop["result"]) == ("pod-1", "ok")
    assert stop["idle_since"] and "saves $0.68/h" in stop["detail"]
    # (its drift, also held, is logged apart)
    assert "not stopped: watch.hold in its vars" in held(events)[0]["detail"], events
    assert not [e for e in events if e["pod"] == "pod-3" and e["seen"] == "idle"]
    status = {pod["name"]: pod["status"] for pod in list_pods(fleet.state)["pods"]}
    assert status == {"pod-1": "EXITED", "pod-2": "RUNNING", "pod-3": "RUNNING"}

    watch(fleet, tmp_path, "--passes", "2")  # a watch started again stops nothing more
    assert stops(fleet) == [f"stop {ids['pod-1']} 200"]
