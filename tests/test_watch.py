"""End to end: ``podstate watch`` on sandbox pods listed by a pods file.

Every wait is for an event: a test reads the watch's own JSON lines, starts the next pass
with SIGHUP (the interval is an hour), or counts passes (``--passes``, with a short
interval: what happens is decided per pass, never by the clock).
"""

from __future__ import annotations

import configparser
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from podstate.sandbox import container
from podstate.sandbox.api import list_pods
from tests.e2e import BIN, ROOT, Fleet, Watching, apply, exec_count, start_apply
from tests.test_fold import BLOCKED

SANDBOX = {"pods": 3}
UNIT = ROOT / "examples" / "systemd" / "podstate-watch.service"
PODS = ("pod-1", "pod-2", "pod-3")
PROFILE = "/etc/profile.d/podstate.sh"
GATE = '''"""Holds the apply until the test lets it go: /tmp/watch-go on the pod."""
from pyinfra.operations import server

server.shell(
    name="Wait for the gate",
    commands=["while [ ! -e /tmp/watch-go ]; do sleep 0.1; done"],
)
'''


@pytest.fixture
def pods(fleet: Fleet) -> Fleet:
    """The module's fleet with the module's desired state (pod-3's 64M /dev/shm accepted),
    converged, whatever the test before left."""
    for pod in ("pod-1", "pod-2"):
        fleet.host_vars(pod, None)
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    return fleet


def watch(fleet: Fleet, *args: str, pods_file: Path | None = None):
    """Run ``podstate watch --json ARGS`` to its end; return its status, events, stderr."""
    result = subprocess.run(
        [str(BIN / "podstate"), "watch", "--json", *args],
        cwd=ROOT,
        env=fleet.env(pods_file),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    return result.returncode, [json.loads(line) for line in result.stdout.splitlines()], result


def applied(events: list[dict]) -> dict[str, list[tuple[int, str]]]:
    """Return, per pod, the (pass, result) of each apply that ended (not ``started``)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for event in events:
        if event["action"] == "apply" and event["result"] != "started":
            out.setdefault(event["pod"], []).append((event["pass"], event["result"]))
    return out


def has(fleet: Fleet, pod: str, path: str) -> bool:
    return fleet.ssh(pod, f"test -e {path}").returncode == 0


def test_invalid_vars_stop_it_before_the_first_pass_with_one_line(pods: Fleet):
    pods.host_vars("pod-2", {"watch": {"hold": "yes"}})
    before = {pod: exec_count(pods, pod) for pod in PODS}
    status, events, result = watch(pods)
    assert status == 1
    assert events == []
    assert result.stderr == (
        f"podstate: {pods.vars_dir}/host_vars/pod-2.yaml: watch.hold: expected true or false, "
        "got a string (pod pod-2)\n"
    )
    assert {pod: exec_count(pods, pod) for pod in PODS} == before  # no pod contacted


def test_once_applies_to_a_drifted_pod_and_exits_with_the_checks_status(pods: Fleet):
    pods.out("pod-1", f"rm {PROFILE}")
    status, events, result = watch(pods, "--once")
    assert status == 0, result.stdout + result.stderr
    assert applied(events) == {"pod-1": [(1, "ok")]}
    (started,) = [e for e in events if e["result"] == "started"]
    assert (started["pod"], started["seen"]) == ("pod-1", "drift")
    assert has(pods, "pod-1", PROFILE)
    (summary,) = [e for e in events if e["pod"] is None]
    assert (summary["seen"], summary["action"], summary["result"]) == ("pass", "check", "done")
    keys = {"time", "pass", "pod", "seen", "action", "seconds", "result", "detail"}
    keys |= {"idle_since", "cost_since"}
    assert all(set(event) == keys for event in events)
    # converged: nothing to do, status 0
    status, events, _ = watch(pods, "--once")
    assert (status, applied(events)) == (0, {})


def test_a_held_pod_is_checked_and_logged_never_changed(pods: Fleet):
    pods.host_vars("pod-1", {"watch": {"hold": True}})
    for pod in ("pod-1", "pod-2"):
        pods.out(pod, f"rm {PROFILE}")
    status, events, result = watch(pods, "--once", "--exclude", "pod-2")
    assert status == 2, result.stdout + result.stderr  # drift left: the held pods'
    assert applied(events) == {}
    held = {e["pod"]: e for e in events if e["result"] == "held"}
    assert held["pod-1"]["seen"] == "drift" and held["pod-1"]["action"] == "none"
    assert held["pod-1"]["detail"] == "watch.hold in its vars"
    assert held["pod-2"]["detail"] == "--exclude"
    assert not has(pods, "pod-1", PROFILE) and not has(pods, "pod-2", PROFILE)
    # the hold changes nothing the roles do: released, a run puts both back, and only them
    pods.host_vars("pod-1", None)
    status, events, _ = watch(pods, "--once")
    assert status == 0
    assert applied(events) == {"pod-1": [(1, "ok")], "pod-2": [(1, "ok")]}


def test_a_failing_pod_backs_off_while_the_others_converge(pods: Fleet):
    pods.out("pod-1", "printf 'not a directory\\n' > /root/blocker")
    try:
        pods.host_vars("pod-1", {"files": {BLOCKED: {"content": "x = 1\n"}}})
        pods.host_vars("pod-2", {"env": {"WATCHED": "yes"}})
        status, events, result = watch(pods, "--interval", "0.1", "--passes", "5")
        assert status == 0, result.stderr
        # tried in pass 1, not in 2, again in 3 (2 passes later), then not before pass 7
        assert applied(events) == {"pod-1": [(1, "failed"), (3, "failed")], "pod-2": [(1, "ok")]}
        failure = [e for e in events if e["pod"] == "pod-1" and e["result"] == "failed"]
        assert "File exists" in failure[0]["detail"]
        assert "next try in pass 3" in failure[0]["detail"]
        assert "next try in pass 7" in failure[1]["detail"]
        summaries = {e["pass"]: e["detail"] for e in events if e["pod"] is None}
        assert "waiting: pod-1 (pass 3)" in summaries[2]
        assert "waiting: pod-1 (pass 7)" in summaries[5]
        assert pods.out("pod-2", "bash -lc 'echo $WATCHED'") == "yes\n"
    finally:
        pods.out("pod-1", "rm -f /root/blocker")


def test_a_new_pod_in_the_pods_file_is_applied_in_the_next_pass(pods: Fleet, tmp_path):
    listing = yaml.safe_load(pods.pods_file.read_text())
    fewer = tmp_path / "pods.yaml"

    def only(*names: str) -> None:
        fewer.write_text(yaml.safe_dump({**listing, "pods": {n: pods.pods[n] for n in names}}))

    only("pod-1", "pod-2")
    pods.out("pod-3", f"rm {PROFILE}")
    watching = Watching(pods, pods_file=fewer)
    try:
        first = watching.end_of_pass(1)
        assert first["detail"].startswith("2 pods from the pods file")
        only(*PODS)  # pod-3 joins
        watching.signal(signal.SIGHUP)  # the next pass, now
        second = watching.end_of_pass(2)
        assert second["action"] == "list" and second["detail"].startswith("3 pods")
        only("pod-1", "pod-3")  # pod-2 leaves
        watching.signal(signal.SIGHUP)
        watching.end_of_pass(3)
        watching.signal(signal.SIGTERM)
        assert watching.finish() == 0
    finally:
        watching.stop()
    assert applied(watching.events) == {"pod-3": [(2, "ok")]}
    (started,) = [e for e in watching.events if e["result"] == "started"]
    assert (started["pod"], started["seen"]) == ("pod-3", "new")
    assert has(pods, "pod-3", PROFILE)
    (gone,) = [e for e in watching.events if e["seen"] == "gone"]
    assert (gone["pass"], gone["pod"], gone["action"]) == (3, "pod-2", "none")
    stop = watching.events[-1]
    assert (stop["seen"], stop["action"], stop["result"]) == ("SIGTERM", "stop", "now")


def test_vars_made_invalid_while_it_runs_say_so_each_pass_and_apply_nothing(pods: Fleet):
    watching = Watching(pods, "--check-every", "1")  # every pass checks, and would apply
    try:
        watching.end_of_pass(1)
        pods.out("pod-1", f"rm {PROFILE}")
        pods.host_vars("pod-2", {"env": {"COUNT": 3}})
        for number in (2, 3):
            watching.signal(signal.SIGHUP)
            invalid = watching.end_of_pass(number)
            assert (invalid["seen"], invalid["action"]) == ("invalid", "none")
            assert invalid["detail"].endswith(
                "host_vars/pod-2.yaml: env.COUNT: 3 must be a string without NUL bytes (quote "
                'numbers: "1"); YAML read 3 as an integer: quote it (pod pod-2)'
            )
        assert not has(pods, "pod-1", PROFILE)
        pods.host_vars("pod-2", None)
        watching.signal(signal.SIGHUP)
        watching.end_of_pass(4)
        watching.signal(signal.SIGTERM)
        assert watching.finish() == 0
    finally:
        watching.stop()
    for number in (2, 3):  # one line per pass, nothing else
        assert [e["seen"] for e in watching.events if e["pass"] == number] == ["invalid"]
    assert applied(watching.events) == {"pod-1": [(4, "ok")]}
    assert has(pods, "pod-1", PROFILE)


def test_a_restart_runpod_reports_is_put_back_host_key_included(pods: Fleet, tmp_path):
    """The sandbox's RunPod API reports a new startedAt for pod-2 after ``sandbox restart``
    (its container disk wiped, a new host key): the next pass applies to pod-2 alone, its
    new key is accepted, and it is ready again."""
    store = tmp_path / "hostkeys"
    assert apply(pods, env=pods.api_env(store)).returncode == 0  # keys trusted, pods ready
    watching = Watching(pods, env=pods.api_env(store))
    try:
        watching.end_of_pass(1)  # checked: converged
        container.restart("pod-2")
        assert not has(pods, "pod-2", PROFILE)
        watching.signal(signal.SIGHUP)
        second = watching.end_of_pass(2)
        assert second["detail"].startswith("3 pods from the RunPod API")
        watching.signal(signal.SIGTERM)
        assert watching.finish() == 0
    finally:
        watching.stop()
        accept_new_key(pods, "pod-2")  # for the pods file the module's other tests use
    assert applied(watching.events) == {"pod-2": [(2, "ok")]}
    (started_event,) = [e for e in watching.events if e["result"] == "started"]
    assert started_event["seen"] == "restarted"
    assert has(pods, "pod-2", PROFILE)
    assert pods.ssh("pod-2", "podstate-ready").returncode == 0
    pod_id = json.loads((pods.state / "pods.json").read_text())["pod-2"]["pod_id"]
    meta = json.loads((store / f"{pod_id}.json").read_text())
    assert (
        meta["recorded_at"]
        == json.loads((pods.state / "pods.json").read_text())["pod-2"]["started_at"]
    )  # re-keyed after the restart RunPod reported


def test_a_pass_lists_the_pods_once_and_leaves_no_listing_behind(
    pods: Fleet, tmp_path, provider_api
):
    """The check and the apply of a pass read the listing the watch made, not the API: one
    request a pass, and the listing's private file is gone after it."""
    env = pods.api_env(tmp_path / "hostkeys")
    api = provider_api("runpod", key=env["RUNPOD_API_KEY"])
    api.serve(list_pods(pods.state))
    temp = tmp_path / "tmp"
    temp.mkdir()
    env.update(RUNPOD_API_URL=api.url, TMPDIR=str(temp))
    pods.out("pod-1", f"rm {PROFILE}")
    watching = Watching(pods, "--once", env=env)
    try:
        status = watching.finish()
    finally:
        watching.stop()
    assert status == 0, watching.stderr()
    assert applied(watching.events) == {"pod-1": [(1, "ok")]}  # checked, then applied
    listings = [r for r in api.requests if r["path"] == "/v2/pods"]
    others = {r["path"] for r in api.requests} - {"/v2/pods"}
    assert len(listings) == 1  # the rest: each new pod's host keys read from its log, once
    assert all(path.endswith("/logs") for path in others), others
    assert list(temp.iterdir()) == []


def test_a_newer_pod_of_a_held_pods_name_leaves_it_its_name_and_its_hold(
    pods: Fleet, tmp_path, provider_api
):
    """RunPod lists a second pod named ``trainer``, newer: the first keeps the name, so its
    ``host_vars/trainer.yaml`` (its hold) is still its own, and the watch leaves it alone."""
    listed = {doc["name"]: doc for doc in list_pods(pods.state)["pods"]}
    old, newer = listed["pod-1"], listed["pod-2"]
    old.update(name="trainer", createdAt="2026-05-01T00:00:00Z")
    newer.update(name="trainer", createdAt="2026-06-01T00:00:00Z")
    env = pods.api_env(tmp_path / "hostkeys")
    api = provider_api("runpod", key=env["RUNPOD_API_KEY"])
    pods.host_vars("trainer", {"watch": {"hold": True}})
    try:
        api.serve({"pods": [newer, old]})
        env["RUNPOD_API_URL"] = api.url
        pods.out("pod-1", f"rm {PROFILE}")
        watching = Watching(pods, "--once", env=env)
        try:
            status = watching.finish()
        finally:
            watching.stop()
    finally:
        pods.host_vars("trainer", None)
    assert status == 2, watching.stderr()  # drift left, on the held pod
    held = {e["pod"]: e for e in watching.events if e["result"] == "held"}
    assert set(held) == {"trainer"} and held["trainer"]["seen"] == "drift"
    assert applied(watching.events) == {}
    assert not has(pods, "pod-1", PROFILE)
    (summary,) = [e for e in watching.events if e["pod"] is None]
    assert summary["detail"].startswith("2 pods from the RunPod API")


def accept_new_key(fleet: Fleet, pod: str) -> None:
    """Make the pods file's known_hosts hold ``pod``'s key of now (a restart changed it), as
    a user does after checking it."""
    port = json.loads((fleet.state / "pods.json").read_text())[pod]["port"]
    path = fleet.state / "known_hosts"
    kept = [ln for ln in path.read_text().splitlines() if not ln.startswith(f"[127.0.0.1]:{port} ")]
    new = (fleet.state / "pods" / pod / "known_hosts").read_text().splitlines()
    path.write_text("".join(f"{line}\n" for line in kept + new))


def gated(pods: Fleet, tmp_path: Path) -> Watching:
    """Start a watch whose first apply waits on every pod for the test to open the gate
    (``/tmp/watch-go``), once every pod's apply has started."""
    gate = tmp_path / "gate.py"
    gate.write_text(GATE)
    for pod in PODS:
        pods.out(pod, "rm -f /tmp/watch-go")
    pods.out("pod-1", f"rm {PROFILE}")
    watching = Watching(pods, "--deploy", "deploy/pod.py", "--deploy", str(gate))
    started = set()
    while started != set(PODS):
        started.add(watching.until(lambda e: e["result"] == "started")["pod"])
    return watching


def open_gate(pods: Fleet) -> None:
    for pod in PODS:
        pods.out(pod, "touch /tmp/watch-go")


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_stop_during_an_apply_lets_it_finish_then_exits_0(pods: Fleet, tmp_path, how):
    """SIGTERM to the watch (systemd, a CI job stopped), or Ctrl-C (SIGINT to its process
    group, the pyinfra child's not included)."""
    watching = gated(pods, tmp_path)
    try:
        if how == "SIGTERM":
            watching.signal(signal.SIGTERM)
        else:
            watching.ctrl_c()
        stop = watching.until(lambda e: e["action"] == "stop")
        assert stop["seen"] == ("SIGTERM" if how == "SIGTERM" else "SIGINT")
        assert stop["result"] == "after this pass"
        open_gate(pods)
        assert watching.finish() == 0
        assert watching.stderr() == ""
    finally:
        watching.stop()
        open_gate(pods)
    after = watching.events[watching.events.index(stop) + 1 :]
    assert applied(after) == {pod: [(1, "ok")] for pod in PODS}  # finished, after the signal
    assert has(pods, "pod-1", PROFILE)
    assert [e["pass"] for e in watching.events if e["pod"] is None][-1] == 1  # no second pass


def test_a_second_signal_stops_it_at_once(pods: Fleet, tmp_path):
    """Last in the module: the apply it stops leaves its pods' locks to expire."""
    watching = gated(pods, tmp_path)
    try:
        watching.signal(signal.SIGINT)
        watching.until(lambda e: e["action"] == "stop")
        watching.signal(signal.SIGTERM)
        assert watching.finish() == 128 + signal.SIGTERM
        assert watching.stderr().strip().startswith("podstate: stopped by SIGTERM")
    finally:
        watching.stop()
        open_gate(pods)
    assert applied(watching.events) == {}  # no apply was reported done


def test_the_systemd_unit_lets_the_apply_in_flight_finish():
    unit = configparser.ConfigParser(interpolation=None)
    unit.optionxform = str  # systemd's keys are case-sensitive
    unit.read_string(UNIT.read_text())
    service = unit["Service"]
    assert service["ExecStart"].endswith("/bin/podstate watch")
    assert service["KillMode"] == "mixed"  # SIGTERM to podstate alone, not to pyinfra
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"  # a pass now
    assert "PODSTATE_HOSTKEYS=/var/lib/podstate/hostkeys" in service["Environment"]
    assert service["StateDirectory"] == "podstate"


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_the_systemd_unit_verifies(tmp_path):
    """systemd's own check, on the unit with the repository where the example puts it."""
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/srv/podstate", str(ROOT)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (0, "")


LOGGED = '''"""Holds the apply at the gate, logging who is inside (a second run inside says so)."""
from pyinfra.operations import server

server.shell(
    name="Logged team step",
    commands=[
        "mkdir /root/inside 2>/dev/null || echo overlap >> /root/race.log; "
        "echo start $(cat /run/podstate.lock/token) >> /root/race.log; "
        "while [ ! -e /tmp/watch-go ]; do sleep 0.1; done; "
        "echo end >> /root/race.log; rmdir /root/inside"
    ],
)
'''


def test_watch_and_a_hand_run_apply_on_one_pod_never_interleave(pods: Fleet, tmp_path):
    """The watch's apply is inside a team operation, holding the pod lock, when a person's
    apply starts: the person's run waits for the lock, and runs that operation after."""
    logged = tmp_path / "zz-logged.py"
    logged.write_text(LOGGED)
    for pod in PODS:
        pods.out(pod, "rm -f /tmp/watch-go /root/race.log")
    watching = Watching(pods, "--deploy", "deploy/pod.py", "--deploy", str(logged))
    by_hand = None
    try:
        started = set()
        while started != set(PODS):
            started.add(watching.until(lambda e: e["result"] == "started")["pod"])
        for pod in PODS:  # each pod's watch apply is inside the operation
            while "start" not in pods.out(pod, "cat /root/race.log 2>/dev/null || true"):
                time.sleep(0.05)
        before = {pod: exec_count(pods, pod) for pod in PODS}
        by_hand = start_apply(
            pods,
            env={"PODSTATE_LOCK_WAIT": "120"},
            deploys=("deploy/pod.py", str(logged)),
        )
        while any(exec_count(pods, pod) == before[pod] for pod in PODS):
            time.sleep(0.05)  # the person's run has reached every pod, and waits
        open_gate(pods)
        _, err = by_hand.communicate(timeout=300)
        assert by_hand.returncode == 0, err
        watching.signal(signal.SIGTERM)
        assert watching.finish() == 0
    finally:
        watching.stop()
        open_gate(pods)
        if by_hand and by_hand.poll() is None:
            by_hand.kill()
    assert applied(watching.events) == {pod: [(1, "ok")] for pod in PODS}
    for pod in PODS:
        log = [line for line in pods.out(pod, "cat /root/race.log").split("\n") if line]
        assert "overlap" not in log, (pod, log)
        assert [line.split()[0] for line in log] == ["start", "end", "start", "end"], log
        assert log[0] != log[2]  # two runs' lock tokens
