"""Sandbox RunPod pods and sandbox Vast instances in one inventory, one check, one apply.

The sandbox's Vast API answers as Vast's does: each page validates against the spec extract
(tests/fixtures/vast/), pages hold 25 instances at most, and a 429 comes without
``Retry-After``.
"""

from __future__ import annotations

import json

from podstate.sandbox import vast_api
from podstate.sandbox.state import ACTIONS_LOG
from tests.e2e import Watching, apply, check, run
from tests.test_vast import assert_valid

SANDBOX = {"pods": 2, "vast": 2}


def _env(fleet) -> dict[str, str]:
    return {**fleet.api_env(), "PODSTATE_INVENTORY": "runpod,vast"}


def _inventory(fleet) -> dict:
    result = run(fleet, [str(_bin("podstate")), "inventory", "--json"], env=_env(fleet))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def _bin(name: str):
    from tests.e2e import BIN

    return BIN / name


def test_the_sandbox_vast_api_pages_past_25_as_the_spec_says(fleet):
    vast_api.pad(fleet.state, 30)
    try:
        first = vast_api.answer(fleet.state, {})
        assert first[0] == 200
        assert_valid(first[1])
        assert len(first[1]["instances"]) == 25 and first[1]["next_token"]
        second = vast_api.answer(fleet.state, {"after_token": [first[1]["next_token"]]})
        assert_valid(second[1])
        assert second[1]["next_token"] is None
        assert len(first[1]["instances"]) + len(second[1]["instances"]) == 32
        vast_api.rate_limit(fleet.state, 2)
        found = _inventory(fleet)
        skipped = [item for item in found["skipped"] if item["provider"] == "vast"]
        assert len(skipped) == 30 and all(i["reason"] == "status stopped" for i in skipped)
        assert any("rate limit was hit 2 times (429, no Retry-After)" in n for n in found["notes"])
    finally:
        vast_api.pad(fleet.state, 0)
        vast_api.rate_limit(fleet.state, 0)


def test_one_inventory_groups_and_endpoints(fleet):
    pods = {pod["name"]: pod for pod in _inventory(fleet)["pods"]}
    assert set(pods) == {"pod-1", "pod-2", "vast-1", "vast-2"}
    assert pods["pod-1"]["groups"][:2] == ["community", "runpod"]
    assert pods["pod-2"]["groups"][:2] == ["secure", "runpod"]
    assert pods["vast-1"]["groups"] == ["community", "vast", "gpu_rtx_4090", "gpus_2"]
    assert pods["vast-2"]["groups"] == ["community", "vast", "gpu_rtx_3090", "gpus_1"]
    assert (pods["vast-1"]["endpoint"], pods["vast-2"]["endpoint"]) == ("direct", "proxy")
    assert pods["vast-2"]["address"] == "localhost"  # Vast's proxy host in the sandbox


def test_one_check_and_one_apply_cover_both_clouds(fleet, tmp_path):
    env = _env(fleet)
    report = tmp_path / "check.json"
    # Vast's login habit: every SSH session starts tmux, which fails without a terminal, so
    # a command runs nothing; the check, which writes nothing, names it
    assert fleet.ssh("vast-1", "echo ran").stdout == ""
    before = check(fleet, "--json", str(report), env=env)
    assert "Traceback" not in before.stderr, before.stderr
    verdicts = json.loads(report.read_text())["pods"]
    assert set(verdicts) == {"pod-1", "pod-2", "vast-1", "vast-2"}
    assert {verdicts[name]["status"] for name in ("pod-1", "pod-2")} == {"drift"}
    for name in ("vast-1", "vast-2"):
        assert verdicts[name]["status"] == "error"
        assert "SSH sessions start inside tmux and run no command" in verdicts[name]["error"]
        assert "touch ~/.no_auto_tmux" in verdicts[name]["error"]
    assert fleet.ssh("vast-1", "echo ran").stdout == ""  # the check changed nothing

    applied = apply(fleet, "-vv", env=env)
    for name in ("vast-1", "vast-2"):
        assert f"[{name}] SSH sessions started inside tmux" in applied.stderr
        assert "created ~/.no_auto_tmux over SFTP" in applied.stderr
    # only the pod whose /dev/shm cannot be fixed fails, after its fixable state was applied
    assert applied.json["results"]["failed_hosts"] == ["vast-2"], applied.stderr[-2000:]
    assert "[vast-2] violation: shm.min_size" in applied.stderr
    assert fleet.out("vast-1", "echo ran") == "ran\n"
    # NCCL guards: Vast counts as COMMUNITY; vast-1's two GPUs talk over PCIe
    profile = fleet.out("vast-1", "cat /etc/profile.d/podstate.sh")
    assert "export NCCL_P2P_DISABLE=1\n" in profile
    assert "NCCL_P2P_DISABLE" in fleet.out("pod-1", "cat /etc/profile.d/podstate.sh")
    assert "NCCL_P2P_DISABLE" not in fleet.out("pod-2", "cat /etc/profile.d/podstate.sh")

    after = check(fleet, "--json", str(report), env=env)
    verdicts = json.loads(report.read_text())["pods"]
    assert {name: v["status"] for name, v in verdicts.items()} == {
        "pod-1": "ok", "pod-2": "ok", "vast-1": "ok", "vast-2": "violation",
    }, after.stdout  # fmt: skip
    # each Vast instance's price is Vast's dph_total (the sandbox's: 0.35 an hour)
    assert [verdicts[name]["cost_per_hour"] for name in ("vast-1", "vast-2")] == [0.35, 0.35]
    shm = [v["id"] for v in verdicts["vast-2"]["violations"]]
    assert "shm.min_size" in shm
    _no_container_api_key(fleet, [applied.stdout, applied.stderr, after.stdout, after.stderr])


def _no_container_api_key(fleet, outputs: list[str]) -> None:
    """Assert that no Vast instance's CONTAINER_API_KEY is in what podstate printed (its
    command lines among it, with -vv), in a file it wrote on the instance or in the host-key
    store, or in any other process's command line on the instance (the secret goes to the
    looking command on its stdin)."""
    for name in ("vast-1", "vast-2"):
        env = (fleet.state / "pods" / name / "container.env").read_text()
        secret = env.split('CONTAINER_API_KEY="')[1].split('"')[0]
        assert secret.startswith("vastai_sandbox_")
        assert not any(secret in text for text in outputs)
        look = (
            'read -r s; grep -rlF -e "$s" /etc /root /usr/local /workspace /tmp;'
            ' for p in /proc/[0-9]*; do [ "$p" = /proc/$$ ] && continue;'
            ' tr \'\\0\' \' \' <"$p/cmdline" 2>/dev/null | grep -qF -e "$s" && echo "$p"; done; :'
        )
        assert fleet.out(name, look, data=secret.encode() + b"\n") == ""
        kept = [p for p in (fleet.state / "hostkeys").rglob("*") if p.is_file()]
        assert kept and not any(secret in p.read_text(errors="replace") for p in kept)


def test_a_vast_restart_keeps_the_container_disk_not_its_start_or_shm(fleet):
    # after the apply above: ~/.no_auto_tmux is on the container disk, so commands run
    before = fleet.out(
        "vast-1", "echo kept >/root/kept; echo gone >/dev/shm/gone; cat /proc/1/stat"
    )
    run(fleet, [str(_bin("podstate")), "sandbox", "restart", "vast-1"], env=_env(fleet))
    after = fleet.out("vast-1", "cat /root/kept; ls -A /dev/shm; cat /proc/1/stat")
    assert after.splitlines()[0] == "kept"
    assert "gone" not in after
    assert _start_time(before) != _start_time(after)


def test_a_vast_start_is_restarted_and_a_watch_pass_puts_it_back(fleet, tmp_path):
    # after the restart above: the container disk kept the marker of the start before
    env = _env(fleet)
    assert fleet.ssh("vast-1", "test -s /etc/podstate/ready").returncode == 0
    assert fleet.ssh("vast-1", "podstate-ready").returncode == 1
    report = tmp_path / "check.json"
    check(fleet, "--json", str(report), env=env)
    verdicts = json.loads(report.read_text())["pods"]
    assert verdicts["vast-1"]["status"] == "restarted", verdicts["vast-1"]
    assert verdicts["vast-1"]["ready"] is False
    assert verdicts["vast-1"]["restarted"]["gone"][:2] == ["processes", "/dev/shm contents"]
    assert (verdicts["pod-1"]["status"], verdicts["pod-1"]["ready"]) == ("ok", True)

    watched = run(
        fleet,
        [str(_bin("podstate")), "watch", "--once", "--json", "--exclude", "vast-2"]
        + ["--state", str(tmp_path / "watch.json")],
        env=env,
    )
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    (started,) = [e for e in events if e["result"] == "started"]
    assert (started["pod"], started["seen"]) == ("vast-1", "restarted")
    assert [e["result"] for e in events if e["pod"] == "vast-1" and e["action"] == "apply"][
        -1:
    ] == ["ok"], watched.stdout + watched.stderr
    assert fleet.ssh("vast-1", "podstate-ready").returncode == 0
    check(fleet, "--json", str(report), env=env)
    assert json.loads(report.read_text())["pods"]["vast-1"]["status"] == "ok"


def test_an_idle_vast_instance_is_stopped_once_by_the_watch(fleet, tmp_path):
    # vast-1 idle (its GPUs at 0 %, as Vast's gpu_util says too), vast-2 excluded
    fleet.host_vars("vast-1", {"idle": {"after": "1s", "action": "stop"}})
    ident = str(json.loads((fleet.state / "pods.json").read_text())["vast-1"]["pod_id"])
    log = fleet.state / ACTIONS_LOG
    args = ["--interval", "0.1", "--check-every", "1", "--exclude", "vast-2"]
    watching = Watching(fleet, *args, "--state", str(tmp_path / "watch.json"), env=_env(fleet))

    def stopped_and_passed(seen: list[dict]) -> bool:
        """Whether a pass has ended after the one that stopped an instance."""
        stops = [e for e in seen if e["pod"] and e["action"] == "stop"]
        return bool(stops) and seen[-1]["pod"] is None and seen[-1]["pass"] > stops[0]["pass"]

    try:  # how many passes a second of idle takes is the clock's
        events = watching.through(stopped_and_passed)
    finally:
        watching.stop()
    assert log.read_text().splitlines() == [f"stop {ident} 200"], events
    (stopped,) = [e for e in events if e["pod"] and e["action"] == "stop"]
    assert (stopped["pod"], stopped["result"]) == ("vast-1", "ok")
    assert "saves $0.35/h" in stopped["detail"]
    assert "a stop keeps the container disk (Vast)" in stopped["detail"]
    # Vast's API lists it stopped now: skipped, not applied to
    found = _inventory(fleet)
    assert {"vast-1"} & {pod["name"] for pod in found["pods"]} == set()


def _start_time(text: str) -> str:
    """Return the start time (field 22) of the /proc/PID/stat line that ends ``text``."""
    return text.rstrip("\n").splitlines()[-1].rpartition(") ")[2].split()[19]


def test_the_login_cause_is_told_from_what_echo_did():
    from podstate.run.login import cause

    assert cause(True, [("stdout", "podstate-login-ok")]) is None
    tmux = [("stderr", "no sessions"), ("stderr", "open terminal failed: not a terminal")]
    assert cause(False, tmux) == "tmux"
    assert cause(False, [("stderr", "bash: /root/.bashrc: line 3: exit")]) == "login"
    assert cause(True, [("stdout", "welcome")]) == "login"
