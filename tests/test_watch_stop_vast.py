"""End to end: ``podstate watch`` stops an idle Vast instance listed by the sandbox's Vast API
only when its processes did no work, and a stop and start between passes restarts its idle
clock, for every watch: two watches with state files of their own, one stops it, a person
starts it again, and the other does not stop it at once.

Passes are counted (``--passes``), never timed; ``after`` is one second, which a pass's
check outlasts.
"""

from __future__ import annotations

from podstate.sandbox import container
from tests.e2e import Fleet, apply
from tests.test_watch_stop import stops
from tests.test_watch_stop import watch as watch_pods

SANDBOX = {"pods": 1, "vast": 1}
NAME = "vast-1"
STOP = {"idle": {"after": "1s", "action": "stop"}}


def _env(fleet: Fleet, tmp_path) -> dict[str, str]:
    return {**fleet.api_env(tmp_path / "hostkeys"), "PODSTATE_INVENTORY": "vast"}


def watch(fleet: Fleet, tmp_path, state: str, *args: str) -> list[dict]:
    """Run ``podstate watch --json`` on the Vast instances, every pass a check, with the
    state file ``state``; return its events."""
    return watch_pods(fleet, tmp_path, *args, state=state, env=_env(fleet, tmp_path))


def _stop_declared(fleet: Fleet, tmp_path) -> None:
    """Declare the idle stop for every pod, and apply once (a Vast instance's SSH sessions
    start inside tmux until an apply makes ~/.no_auto_tmux)."""
    fleet.host_vars(NAME, STOP)
    assert apply(fleet, env=_env(fleet, tmp_path)).returncode == 0


def test_a_cpu_only_job_under_nohup_keeps_an_instance_running(fleet: Fleet, tmp_path):
    _stop_declared(fleet, tmp_path)
    job = "nohup sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!"
    pid = fleet.out(NAME, job).strip()
    try:
        events = watch(fleet, tmp_path, "job.json", "--passes", "4")
    finally:
        fleet.out(NAME, f"kill {pid}; while [ -e /proc/{pid} ]; do sleep 0.1; done")
    assert stops(fleet) == []
    assert not [e for e in events if e["action"] == "stop"]
    assert not [e for e in events if e["pod"] == NAME and e["seen"] == "idle"]


def test_another_watch_does_not_stop_an_instance_started_again_at_once(fleet: Fleet, tmp_path):
    _stop_declared(fleet, tmp_path)
    dry = watch(fleet, tmp_path, "other.json", "--passes", "3", "--dry-run")
    assert [e["pod"] for e in dry if e["result"] == "dry run"][:1] == [NAME]

    events = watch(fleet, tmp_path, "one.json", "--passes", "4")
    assert [(e["pod"], e["result"]) for e in events if e["action"] == "stop"] == [(NAME, "ok")]
    (stopped,) = stops(fleet)
    assert stopped.startswith("stop ")

    container.restart(NAME)  # a person starts it again: Vast keeps its container disk
    events = watch(fleet, tmp_path, "other.json", "--passes", "1")  # its next pass
    assert stops(fleet) == [stopped]
    assert not [e for e in events if e["action"] == "stop"]
    (began,) = [e for e in events if e["pod"] == NAME and e["seen"] == "idle"]
    assert began["result"].startswith("since ")  # a new idle period, by the pod's own clock
