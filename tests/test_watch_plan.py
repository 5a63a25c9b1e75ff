"""What ``podstate watch`` decides at each pass (``podstate.watch.decisions``): pure functions of
what the passes saw, no pods needed; and the loop itself against a fake RunPod API, its
clock, its sleep and its child runs stood in for."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

from podstate.desired.errors import Layer, SpecError
from podstate.desired.spec import resolve
from podstate.inventory.podsfile import Pod
from podstate.watch.decisions import (
    MOVED,
    NEW,
    RESTARTED,
    Event,
    apply_outcomes,
    busy,
    changed,
    exit_code,
    from_report,
    limit_pattern,
    listing_delay,
    next_try,
    sighting,
)
from podstate.watch.loop import Watch
from podstate.watch.options import Options
from tests.e2e import ROOT, new_vars_dir
from tests.test_runpod import KEY, fixture


def api_pod(name: str, started: str | None, port: int = 40000, pod_id: str = "id1", **state):
    """Return an inventory pod as the RunPod source makes it: host data with the pod id,
    address and startedAt, and the resolved state."""
    data = {
        "ssh_hostname": "203.0.113.7",
        "ssh_port": port,
        "pod_id": pod_id,
        "started_at": started,
        "podstate": state,
    }
    return Pod(name, data, ["community"])


def seen(*pods: Pod, exclude: tuple[str, ...] = ()):
    return {pod.name: sighting(pod, exclude) for pod in pods}


T0 = "2026-06-01T12:00:00Z"
T1 = "2026-06-01T14:00:00Z"


def test_first_pass_every_pod_is_new_and_an_unchanged_listing_needs_nothing():
    listed = seen(api_pod("a", T0), api_pod("b", T0, pod_id="id2"))
    assert changed({}, listed) == {"a": NEW, "b": NEW}
    assert changed(listed, listed) == {}


def test_a_moved_starttime_is_a_restart_whatever_else_changed():
    before = seen(api_pod("a", T0), api_pod("b", T0, pod_id="id2"))
    after = seen(api_pod("a", T1, port=40001), api_pod("b", T0, pod_id="id2"))
    assert changed(before, after) == {"a": RESTARTED}


def test_the_same_instant_written_another_way_is_no_restart():
    before = seen(api_pod("a", "2026-06-01T12:00:00Z"))
    assert changed(before, seen(api_pod("a", "2026-06-01T12:00:00.000+00:00"))) == {}
    # a start time appearing or vanishing is a change, not "fine": unknown is never unchanged
    assert changed(before, seen(api_pod("a", None))) == {"a": RESTARTED}


def test_another_address_is_a_move_and_another_pod_id_a_new_pod():
    before = seen(api_pod("a", T0))
    assert changed(before, seen(api_pod("a", T0, port=40002))) == {"a": MOVED}
    assert changed(before, seen(api_pod("a", T1, pod_id="other"))) == {"a": NEW}


def test_a_pods_file_pod_has_no_start_time_and_moves_by_address():
    def file_pod(port: int) -> Pod:
        return Pod("p", {"ssh_hostname": "10.0.0.1", "ssh_port": port, "podstate": {}}, [])

    before = seen(file_pod(22))
    assert before["p"].started_at is None and before["p"].pod_id is None
    assert changed(before, seen(file_pod(22))) == {}
    assert changed(before, seen(file_pod(2222))) == {"p": MOVED}


def test_a_pod_that_comes_back_is_compared_with_its_last_sighting():
    """``known`` holds every pod's last sighting, not only the last pass's pods: a pod that
    was stopped (skipped) and started again is a restart, not a new pod."""
    known = seen(api_pod("a", T0))
    assert changed(known, {}) == {}
    assert changed(known, seen(api_pod("a", T1))) == {"a": RESTARTED}
    assert changed(known, seen(api_pod("a", T0))) == {}


def test_held_by_vars_or_by_exclude():
    held = sighting(api_pod("a", T0, watch={"hold": True}))
    assert held.held == "watch.hold in its vars"
    assert sighting(api_pod("a", T0, watch={"hold": False})).held is None
    assert sighting(api_pod("train-1", T0), ("train-*",)).held == "--exclude"
    assert sighting(api_pod("serve-1", T0), ("train-*", "x")).held is None


def test_backoff_doubles_in_passes_up_to_the_cap():
    assert [next_try(n, 10, 30) - 10 for n in range(1, 8)] == [2, 4, 8, 16, 30, 30, 30]
    assert next_try(1, 3, 0) == 4  # a cap under one pass is one pass
    assert next_try(10**6, 1, 5) == 6  # no huge powers


def test_a_failed_listing_puts_the_next_pass_off_at_least_as_long_as_the_api_asked():
    assert [listing_delay(n, 30, 900, None) for n in range(1, 7)] == [60, 120, 240, 480, 900, 900]
    assert listing_delay(1, 30, 900, 600) == 600  # Retry-After longer than the backoff
    assert listing_delay(5, 30, 900, 5) == 900  # and shorter: the backoff holds
    assert listing_delay(1, 30, 900, 10**9) == 3600  # an hour at most, whatever it says
    assert listing_delay(3, 30, 10, None) == 30  # never under the interval
    assert listing_delay(10**6, 1, 900, None) == 900  # no huge powers


class Recorded(Watch):
    """The watch, with its child runs stood in for: each records its command, its
    environment and the listing file handed to it, and writes no report."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.children: list[dict] = []

    def _child(self, command, started=None):
        path = Path(self.child_env["PODSTATE_API_LISTING"])
        self.children.append(
            {
                "command": command,
                "path": path,
                "mode": stat.S_IMODE(path.stat().st_mode),
                "dir_mode": stat.S_IMODE(path.parent.stat().st_mode),
                "text": path.read_text(),
            }
        )
        if started:
            started()
        return 1, "", "stood in for: no report"


def test_api_failures_back_off_as_the_api_asks_and_a_pass_lists_once(
    monkeypatch, tmp_path, provider_api
):
    api = provider_api("runpod")
    for name in [k for k in os.environ if k.startswith(("PODSTATE_", "RUNPOD_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("RUNPOD_API_URL", api.url)
    monkeypatch.setenv("PODSTATE_VARS", str(new_vars_dir(tmp_path / "vars")))
    monkeypatch.setenv("PODSTATE_HOSTKEYS", str(tmp_path / "hostkeys"))
    doc = fixture("example.json")
    doc["pods"][0]["env"] = {"HF_TOKEN": "hf_not_for_files"}
    api.serve(doc)
    api.queue(429, fixture("429.json"), {"Retry-After": "120"})
    api.queue(503, {"title": "Service Unavailable", "status": 503, "detail": "down"})
    out, waits = io.StringIO(), []
    options = Options(["deploy/pod.py"], interval=1, check_every=100, json=True, passes=4)
    watch = Recorded(options, out, sleep=waits.append, clock=lambda: 0.0)
    assert watch.run() == 0
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    first, second = (next(e for e in events if e["pass"] == n) for n in (1, 2))
    assert (first["seen"], first["action"], first["pod"]) == ("rate-limited", "none", None)
    assert first["detail"].endswith("next listing in 120s")
    assert (second["seen"], second["action"]) == ("api-unavailable", "none")
    assert "answered 503 Service Unavailable: down" in second["detail"]
    assert second["detail"].endswith("next listing in 4s")
    assert waits == [120, 4, 1]  # Retry-After; the backoff (2 failures in a row); the interval
    assert len(api.requests) == 4  # one a pass: the check and the apply were handed it
    check, apply = watch.children  # pass 3: the check put off from pass 1, and the new pod
    assert "check" in check["command"] and "--limit" in apply["command"]
    for child in (check, apply):
        assert (child["mode"], child["dir_mode"]) == (0o600, 0o700)
        listing = json.loads(child["text"])
        assert [pod["id"] for pod in listing["pods"]] == ["7h9k2m4n6p"]
        assert "env" not in listing["pods"][0]  # a pod's environment may hold tokens
        assert KEY not in child["text"]
        assert not child["path"].exists()  # gone with its pass


def test_check_report_decides_apply_failure_or_nothing():
    report = {
        "ok": {"status": "ok", "changes": []},
        "drifted": {"status": "drift", "changes": [{"role": "Environment"}]},
        "restarted": {"status": "restarted", "changes": [{"role": "Environment"}]},
        "fixable": {"status": "violation", "changes": [{"role": "Scratch"}]},
        "unfixable": {"status": "violation", "changes": [], "violations": []},
        "down": {"status": "unreachable", "error": "Could not connect"},
        "broken": {"status": "error", "error": "the probe failed"},
        "odd": {"status": "sideways"},
        "changing": {"status": "busy", "changes": [], "holder": "ci-7 pid 41 since 2026"},
        "not listed": {"status": "drift"},
    }
    listed = [name for name in report if name != "not listed"] + ["listed since"]
    apply, failed, statuses = from_report(report, listed)
    assert apply == {
        "drifted": "drift",
        "restarted": "restarted",
        "fixable": "violation",
    }
    assert failed["down"] == "Could not connect" and failed["broken"] == "the probe failed"
    assert "sideways" in failed["odd"]  # unknown is named, never taken for fine
    assert set(statuses) == set(report) - {"not listed"}
    assert "changing" not in apply and "changing" not in failed  # left for this pass
    assert busy(report, statuses) == {
        "changing": "another podstate run is changing it (ci-7 pid 41 since 2026); "
        "it is checked again at the next pass"
    }


PYINFRA_LOG = """--> Connecting to hosts...
    [pod-2] Connected
    [pod-1] Connected
--> Starting operation: Files | File /root/blocker/settings.toml
    [pod-2] Skipped
    [pod-1] mkdir: cannot create directory '/root/blocker': File exists
    [pod-1] Error: executed 1 commands
"""


def pyinfra_json(success=(), no_change=(), error=(), failed=()) -> str:
    op = {"success": list(success), "no_change": list(no_change), "error": list(error)}
    return json.dumps({"plan": [], "results": {"operations": [op], "failed_hosts": list(failed)}})


def test_apply_outcomes_from_pyinfra_json_and_its_lines():
    out = pyinfra_json(no_change=["pod-2"], error=["pod-1"], failed=["pod-1"])
    assert apply_outcomes(["pod-1", "pod-2"], 1, out, PYINFRA_LOG) == {
        "pod-1": "mkdir: cannot create directory '/root/blocker': File exists",
        "pod-2": None,
    }


def test_a_pod_pyinfra_ran_nothing_on_failed():
    out = pyinfra_json(success=["pod-2"])
    log = "    [pod-1] Could not connect ([Errno None] Unable to connect to port 23999)\n"
    outcomes = apply_outcomes(["pod-1", "pod-2", "pod-3"], 1, out, log)
    assert outcomes["pod-1"].startswith("Could not connect")
    assert outcomes["pod-2"] is None
    assert outcomes["pod-3"] == "pyinfra ran nothing on it"


def test_without_pyinfras_json_every_pod_failed():
    log = PYINFRA_LOG + "    [pod-3] violation: shm.min_size: /dev/shm is 64M\n"
    log += "--> pyinfra error: No hosts remaining!\n"
    outcomes = apply_outcomes(["pod-1", "pod-2", "pod-3"], 1, "", log)
    assert outcomes == {
        "pod-1": "mkdir: cannot create directory '/root/blocker': File exists",
        "pod-2": "--> pyinfra error: No hosts remaining!",
        "pod-3": "violation: shm.min_size: /dev/shm is 64M",
    }
    assert apply_outcomes(["a"], 1, "", "") == {"a": "pyinfra exited with status 1"}


def test_a_failed_run_that_names_no_failed_pod_fails_them_all():
    out = pyinfra_json(success=["a"])
    assert apply_outcomes(["a"], 1, out, "--> something went wrong\n") == {
        "a": "--> something went wrong"
    }


def test_limit_names_one_pod_even_when_a_group_has_its_name():
    hosts = ["trainers", "trainers-2", "other"]
    assert limit_pattern("pod-1", {"community"}) == "pod-1"
    pattern = limit_pattern("trainers", {"community", "trainers"})
    assert pattern != "trainers"  # pyinfra would take the group
    assert [h for h in hosts if fnmatch(h, pattern)] == ["trainers"]


def test_exit_code_as_the_check():
    assert exit_code([]) == 0
    assert exit_code(["ok", "ok"]) == 0
    assert exit_code(["ok", "drift"]) == 2
    assert exit_code(["restarted"]) == 2
    assert exit_code(["ok", "busy"]) == 2  # another run is changing it: check again later
    assert exit_code(["busy", "error"]) == 1
    assert exit_code(["drift", "unreachable"]) == 1
    assert exit_code(["violation"]) == 1
    assert exit_code(["error", "ok"]) == 1


def test_event_lines():
    event = Event("pod-1", "drift", "apply", "failed", 4.04, "mkdir: \x1b[2Jno\nmore")
    text = event.line("2026-06-01T12:00:04Z", 3, False)
    assert text == (
        "2026-06-01T12:00:04Z #3 pod-1 drift -> apply: failed (4.0s): mkdir: \\x1b[2Jno more\n"
    )
    assert json.loads(event.line("2026-06-01T12:00:04Z", 3, True)) == {
        "time": "2026-06-01T12:00:04Z",
        "pass": 3,
        "pod": "pod-1",
        "seen": "drift",
        "action": "apply",
        "seconds": 4.0,
        "result": "failed",
        "detail": "mkdir: \x1b[2Jno\nmore",  # the exact text, escaped by JSON
        "idle_since": None,
        "cost_since": None,
    }
    fleet = Event(None, "pass", "list", "done", 0.25)
    assert fleet.line("T", 1, False) == "T #1 * pass -> list: done (0.2s)\n"
    assert json.loads(fleet.line("T", 1, True))["pod"] is None


def test_watch_hold_is_part_of_the_desired_state():
    def state(data: dict) -> dict:
        return resolve([Layer("host_vars/a.yaml", data, Path("."))], "a")

    assert state({"watch": {"hold": True}})["watch"] == {"hold": True}
    assert state({"watch": {}})["watch"] == {"hold": False}
    assert "watch" not in state({})
    with pytest.raises(SpecError) as bad:
        state(yaml.safe_load("watch: {hold: 'yes please'}"))
    assert str(bad.value) == (
        "host_vars/a.yaml: watch.hold: expected true or false, got a string (pod a)"
    )
    with pytest.raises(SpecError, match=r"watch\.pause: unknown key \(allowed: hold\)"):
        state({"watch": {"pause": True}})


SIGNALLED_IN_A_THREAD = """
import signal, sys, threading
from podstate.watch.loop import Watch
from podstate.watch.options import Options

watch = Watch(Options(deploys=["deploy/pod.py"], interval=3600, state=sys.argv[1]))

def one_pass():
    watch.busy = False
    print("pass over", flush=True)
    return 0

watch.one_pass = one_pass
threading.Thread(target=threading.Event().wait, daemon=True).start()  # SIGTERM unblocked
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # so the kernel picks the thread
sys.exit(watch.run())
"""


def test_a_stop_signal_the_kernel_hands_to_another_thread_still_ends_the_wait(tmp_path):
    """Python runs signal handlers in the main thread only: a SIGTERM delivered to another
    thread must still wake the watch from its hour-long wait between passes."""
    watch = subprocess.Popen(
        [sys.executable, "-c", SIGNALLED_IN_A_THREAD, str(tmp_path / "state.json")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout.readline() == "pass over\n"
        watch.terminate()
        assert watch.wait(timeout=60) == 0
    finally:
        watch.kill()
