"""``podstate watch --shard K/N``: the option and the state file of each shard, then shards
of the watch end to end, on sandbox pods listed by the sandbox's RunPod API.

Every wait is for an event: a watch's own JSON lines, or a file the apply writes on a pod.
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from podstate.arguments import parser
from podstate.check.shards import Shard, ShardError, parse, select
from podstate.paths import LOCK
from podstate.sandbox import container
from podstate.watch import state
from podstate.watch.loop import Watch
from podstate.watch.options import Options
from tests.e2e import BIN, ROOT, Fleet, Watching, apply, exec_count
from tests.test_watch import applied

SANDBOX = {"pods": 8}
PODS = [f"pod-{n}" for n in range(1, 9)]  # shard of 4: 1 none, 2 pod-1, 4 pod-3 and pod-5
COUNT = 4
KUBERNETES = ROOT / "examples" / "kubernetes" / "podstate-watch-shards.yaml"
SYSTEMD_SHARDS = ROOT / "examples" / "systemd" / "podstate-watch@.service"
GATE = '''"""Holds the apply, under the pod lock, until the test lets it go."""
from pyinfra.operations import server

server.shell(
    name="Wait for the gate",
    commands=["touch /tmp/shard-inside; while [ ! -e /tmp/shard-go ]; do sleep 0.1; done"],
)
'''


# --- the option and the state file --------------------------------------------------------


@pytest.mark.parametrize("text", ["5/4", "0/4", "x", "", "1/4/2"])
def test_a_bad_shard_is_one_line_and_exit_1_as_checks_is(text):
    """Refused before any file is read or pod listed (no inventory in ``/``), with the line
    ``podstate check --shard`` gives (``shards.parse``); an empty one too, which check takes
    for none: a CI variable that came out empty must not make a watch of the whole fleet."""
    run = subprocess.run(
        [str(BIN / "podstate"), "watch", "--shard", text],
        cwd="/",
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    with pytest.raises(ShardError) as raised:
        parse(text)
    assert (run.returncode, run.stdout, run.stderr) == (1, "", f"podstate: {raised.value}\n")
    assert run.stderr.startswith(f"podstate: --shard {text}: ")


def test_each_shard_has_a_state_file_of_its_own_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    whole = tmp_path / "podstate" / "watch-state.json"
    assert state.default_path() == whole
    assert state.default_path(Shard(2, 4)) == tmp_path / "podstate" / "watch-state-2of4.json"
    paths = {state.default_path(Shard(k, n)) for n in range(1, 13) for k in range(1, n + 1)}
    assert len(paths) == 78 and whole not in paths  # 1 + 2 + ... + 12: none shared
    sharded = Options(deploys=["deploy/pod.py"], shard=Shard(3, 4))
    assert Watch(sharded).idler.path == tmp_path / "podstate" / "watch-state-3of4.json"
    assert [n for n in ("pod-1", "pod-2", "pod-3") if sharded.watches(n)] == ["pod-2"]  # 2, 3, 4
    assert [n for n in ("pod-1", "pod-2") if Options(deploys=[]).watches(n)] == ["pod-1", "pod-2"]
    given = Options(deploys=["deploy/pod.py"], shard=Shard(3, 4), state=str(tmp_path / "s.json"))
    assert Watch(given).idler.path == tmp_path / "s.json"  # --state is taken as given


# --- ready-made shards of the watch: Kubernetes, systemd ------------------------------------


def test_the_kubernetes_example_runs_shards_1_to_n_of_the_watch(tmp_path):
    """An indexed Job of N pods, every 15 minutes; the command each pod runs, with its
    ``JOB_COMPLETION_INDEX`` (0 to N-1), is ``podstate watch --once --shard K/N`` for K = 1
    to N, as podstate's own parser reads it."""
    cron = yaml.safe_load(KUBERNETES.read_text())
    assert (cron["apiVersion"], cron["kind"]) == ("batch/v1", "CronJob")
    spec = cron["spec"]["jobTemplate"]["spec"]
    assert spec["completionMode"] == "Indexed"
    count = spec["completions"]
    assert spec["parallelism"] == count == 4
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy needs it
    (rule,) = spec["podFailurePolicy"]["rules"]
    assert rule["onExitCodes"] == {
        "containerName": container["name"],
        "operator": "In",
        "values": [1, 2],
    }
    stub = tmp_path / "bin" / "podstate"  # what sh hands podstate, one word a line
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    stub.chmod(0o755)
    for index in range(count):
        env = {"PATH": f"{stub.parent}:/usr/bin:/bin", "JOB_COMPLETION_INDEX": str(index)}
        for shell in ("dash", "bash"):
            words = subprocess.run(
                [shell, *container["command"][1:]],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()
            assert container["command"][0] == "sh" and words[:2] == ["watch", "--once"]
            args = parser().parse_args(words)
            assert parse(args.shard) == Shard(index + 1, count), words
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PODSTATE_HOSTKEYS"].startswith(mounts["state"] + "/")  # kept between runs
    assert env["XDG_CACHE_HOME"].startswith(mounts["state"] + "/")  # each shard's state file
    assert env["PODSTATE_SSH_KEY"].startswith(mounts["ssh"] + "/")


def test_the_systemd_template_runs_shard_k_of_n_from_its_instance_name():
    """``podstate-watch@2-4.service`` is K/N escaped as ``systemd-escape`` does it; ``%I``,
    the instance unescaped, gives ``--shard 2/4`` back; the rest is the plain unit's."""
    unit = configparser.ConfigParser(interpolation=None)
    unit.optionxform = str  # systemd's keys are case-sensitive
    unit.read_string(SYSTEMD_SHARDS.read_text())
    service = unit["Service"]
    assert service["ExecStart"].endswith("/bin/podstate watch --shard %I")
    assert service["KillMode"] == "mixed" and service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert "PODSTATE_HOSTKEYS=/var/lib/podstate/hostkeys" in service["Environment"]
    text = SYSTEMD_SHARDS.read_text()
    count = 4
    for k in range(1, count + 1):
        instance = f"podstate-watch@{k}-{count}"
        assert instance in text  # the enable line names every instance of N = 4
        if shutil.which("systemd-escape"):
            made = subprocess.run(
                ["systemd-escape", "--template", SYSTEMD_SHARDS.name, f"{k}/{count}"],
                capture_output=True,
                text=True,
                check=True,
            )
            assert made.stdout.strip() == f"{instance}.service"
            back = subprocess.run(
                ["systemd-escape", "--unescape", "--instance", f"{instance}.service"],
                capture_output=True,
                text=True,
                check=True,
            )
            assert parse(back.stdout.strip()) == Shard(k, count)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_an_instance_of_the_systemd_template_verifies(tmp_path):
    """systemd's own check of ``podstate-watch@2-4.service``, the repository where the
    example puts it."""
    text = SYSTEMD_SHARDS.read_text().replace("/srv/podstate", str(ROOT))
    for name in (SYSTEMD_SHARDS.name, "podstate-watch@2-4.service"):
        (tmp_path / name).write_text(text)
    result = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "podstate-watch@2-4.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (0, "")


# --- end to end -----------------------------------------------------------------------------


def of(k: int) -> list[str]:
    """Return the pods of shard ``k`` of COUNT."""
    return select(PODS, Shard(k, COUNT))


@pytest.fixture(scope="module")
def converged(fleet: Fleet, tmp_path_factory) -> dict[str, str]:
    """The fleet converged through the sandbox's RunPod API (pod-3's 64M /dev/shm accepted);
    return the environment of a watch of it, with a cache of its own and a short lock grace."""
    assert [len(of(k)) for k in range(1, COUNT + 1)] == [0, 1, 5, 2]  # one empty shard
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    env = fleet.api_env(tmp_path_factory.mktemp("hostkeys"))
    env.update(XDG_CACHE_HOME=str(tmp_path_factory.mktemp("cache")), PODSTATE_LOCK_GRACE="3")
    run = apply(fleet, env=env)
    assert run.returncode == 0, run.stderr
    return env


def ready(fleet: Fleet, pod: str) -> bool:
    return fleet.ssh(pod, "podstate-ready").returncode == 0


def takes(fleet: Fleet, pod: str) -> int:
    """Return how many times a run took the pod's lock since its container started (the
    count is on the container disk, wiped by a restart)."""
    return int(fleet.out(pod, f"cat {LOCK}.gen 2>/dev/null || echo 0").split()[0])


def test_four_shards_at_once_put_each_restarted_pod_back_once(fleet: Fleet, converged):
    restarted = ["pod-1", "pod-3", "pod-4", "pod-8"]  # of shards 2, 4, 3, 3
    for pod in restarted:
        container.restart(pod)
    assert not any(ready(fleet, pod) for pod in restarted)
    runs = {
        k: subprocess.Popen(
            [str(BIN / "podstate"), "watch", "--once", "--json", "--shard", f"{k}/{COUNT}"],
            cwd=ROOT,
            env=converged,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        for k in range(1, COUNT + 1)
    }
    events: dict[int, list[dict]] = {}
    for k, process in runs.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, (k, out, err)
        events[k] = [json.loads(line) for line in out.splitlines()]
    for k, shard_events in events.items():
        assert {e["pod"] for e in shard_events} - {None} <= set(of(k)), k  # its pods alone
        (line,) = [e for e in shard_events if e["seen"] == "pass"]
        assert line["detail"].startswith(f"shard {k}/{COUNT}: {len(of(k))} pods from the RunPod")
    every = [e for k in events for e in events[k]]
    assert applied(every) == {pod: [(1, "ok")] for pod in restarted}  # once each, none else
    for pod in restarted:
        assert ready(fleet, pod) and takes(fleet, pod) == 1  # the pod's own count: one apply
    cache = Path(converged["XDG_CACHE_HOME"]) / "podstate"
    kept = {p.name: set(json.loads(p.read_text())["pods"]) for p in cache.glob("watch-*.json")}
    assert kept == {f"watch-state-{k}of{COUNT}.json": set(of(k)) for k in events}  # the fleet


def test_a_shard_whose_runner_dies_leaves_its_pods_to_its_replacement(
    fleet: Fleet, converged, tmp_path
):
    """Shard 4's runner is killed, watch and apply, while the apply holds the locks of its
    two restarted pods: a watch started again for shard 4 puts them back once the locks
    expire (``PODSTATE_LOCK_GRACE`` after the dead run's connections closed)."""
    gate = tmp_path / "gate.py"
    gate.write_text(GATE)
    mine = of(4)
    for pod in mine:
        container.restart(pod)
    others = {pod: exec_count(fleet, pod) for pod in PODS if pod not in mine}
    args = ("--shard", f"4/{COUNT}", "--check-every", "1", "--deploy", "deploy/pod.py")
    dying = Watching(fleet, *args, "--deploy", str(gate), env=converged)
    try:
        started = set()
        while not set(mine) <= started:
            started.add(dying.until(lambda e: e["result"] == "started")["pod"])
        for pod in mine:  # inside the gate, the lock held: wait for it, not for time
            deadline = time.monotonic() + 120  # a bound for a hung apply, not a wait
            while fleet.ssh(pod, "test -e /tmp/shard-inside").returncode:
                assert time.monotonic() < deadline, f"{pod}: the apply never reached the gate"
        (child,) = (
            Path(f"/proc/{dying.process.pid}/task/{dying.process.pid}/children").read_text().split()
        )
        dying.process.kill()  # the runner dies: the watch, then its apply (a session of its own)
        os.killpg(int(child), signal.SIGKILL)
        assert dying.process.wait(timeout=60) == -signal.SIGKILL
    finally:
        dying.stop()
    for pod in PODS:
        if pod in mine:
            assert fleet.ssh(pod, f"test -d {LOCK}").returncode == 0  # left held
            assert not ready(fleet, pod)
        fleet.out(pod, "touch /tmp/shard-go")  # the dead run's last command may end
    assert applied(dying.events) == {}  # no apply ended
    assert started == set(mine)
    replacement = Watching(fleet, *args, "--deploy", str(gate), env=converged)
    try:
        for number in range(1, 11):  # until the locks expire: busy, skipped, meanwhile
            replacement.end_of_pass(number)
            if all(applied(replacement.events).get(pod) for pod in mine):
                break
            replacement.signal(signal.SIGHUP)
        replacement.signal(signal.SIGTERM)
        assert replacement.finish() == 0, replacement.stderr()
    finally:
        replacement.stop()
    outcomes = applied(replacement.events)
    assert set(outcomes) == set(mine)
    assert all([result for _, result in outcomes[pod]] == ["ok"] for pod in mine), outcomes
    for pod in mine:
        assert ready(fleet, pod)
    seen = {e["pod"] for e in replacement.events} - {None}
    assert seen <= set(mine), seen
    served = {pod: exec_count(fleet, pod) for pod in others}
    assert served == {pod: n + 1 for pod, n in others.items()}  # the touch alone: no run there
