"""Sandbox RunPod pods and sandbox Vast instances in one inventory, one check, one apply.

The sandbox's Vast API answers as Vast's does: each page validates against the spec extract
(tests/fixtures/vast/), pages hold 25 instances at most, and a 429 comes without
``Retry-After``.
"""

from __future__ import annotations

import json

from podstate.sandbox import vast_api
from tests.e2e import apply, check, run
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
    before = check(fleet, "--json", str(report), env=env)
    assert "Traceback" not in before.stderr
    verdicts = json.loads(report.read_text())["pods"]
    assert set(verdicts) == {"pod-1", "pod-2", "vast-1", "vast-2"}
    assert {verdicts[name]["status"] for name in ("pod-1", "pod-2", "vast-1")} == {"drift"}
    shm = [v["id"] for v in verdicts["vast-2"]["violations"]]
    assert verdicts["vast-2"]["status"] == "violation" and "shm.min_size" in shm
    assert not any(v["id"] == "shm.min_size" for v in verdicts["vast-1"]["violations"])

    applied = apply(fleet, env=env)
    # only the pod whose /dev/shm cannot be fixed fails, after its fixable state was applied
    assert applied.json["results"]["failed_hosts"] == ["vast-2"], applied.stderr[-2000:]
    assert "[vast-2] violation: shm.min_size" in applied.stderr
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
