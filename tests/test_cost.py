"""What the fleet costs: each pod's price per hour (RunPod's ``cost``, a pods file's
``cost_per_hour``) and the fleet's total, in every report; unknown is null, never 0.

Pure parts on data; end to end on sandbox pods listed by the sandbox's RunPod API, whose
answers validate against RunPod's OpenAPI document.
"""

from __future__ import annotations

import json

import pytest

from podstate.check import markdown, reports, usage
from podstate.check.result import PodResult, from_json, problem, to_json
from podstate.inventory import live
from podstate.inventory.runpod_client import InventoryError
from podstate.inventory.runpod_pods import parse
from podstate.sandbox.api import list_pods
from podstate.sandbox.shapes import shape_for
from tests.e2e import check
from tests.test_runpod import assert_valid, fixture

SANDBOX = {"pods": 2}


def _results(*prices: float | None) -> dict[str, PodResult]:
    return {f"pod-{i + 1}": PodResult(cost_per_hour=p) for i, p in enumerate(prices)}


def test_the_api_price_and_live_reading_reach_the_pod():
    pod = fixture("example.json")["pods"][0]
    pod["runtime"]["gpus"] = [{"util": 94, "memoryUtil": 78}]
    assert_valid({"pods": [pod]})
    (api,), _ = parse([pod])
    assert api.cost_per_hour == 0.44
    assert api.live == live.Live((94,), (78,), 3600)
    assert api.live.in_use() is True


def test_a_pod_without_a_price_or_gpu_reading_is_unknown_never_zero():
    pod = fixture("example.json")["pods"][0]
    del pod["cost"]
    (api,), _ = parse([pod])
    assert api.cost_per_hour is None
    assert api.live.in_use() is None  # runtime without gpus: no reading


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"cost": "0.44"}, "pods[0] (id 7h9k2m4n6p).cost: expected a price per hour"),
        ({"cost": -1}, ".cost: expected a price per hour (a number >= 0), got -1"),
        ({"runtime": {"gpus": [{"util": 101}]}}, ".runtime.gpus[0].util: expected a percentage"),
        ({"runtime": {"gpus": [{"util": 0, "memoryUtil": -3}]}}, ".memoryUtil: expected a perc"),
        ({"runtime": []}, ".runtime: expected an object or null, got a list"),
    ],
)
def test_a_malformed_price_or_reading_is_one_line(change, words):
    pod = {**fixture("example.json")["pods"][0], **change}
    with pytest.raises(InventoryError) as raised:
        parse([pod])
    assert words in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_fleet_total_is_null_while_any_price_is_unknown():
    known = to_json(_results(0.44, 2.99))
    assert known["summary"]["cost_per_hour"] == pytest.approx(3.43)
    assert known["summary"]["cost_unknown"] == 0
    partly = to_json(_results(0.44, None))
    assert partly["summary"]["cost_per_hour"] is None
    assert partly["summary"]["cost_unknown"] == 1
    assert partly["pods"]["pod-2"]["cost_per_hour"] is None
    assert problem(known) is None and problem(partly) is None
    assert from_json(partly)["pod-1"].cost_per_hour == 0.44


def test_the_table_says_each_price_and_the_total_in_its_last_line():
    text = reports.table(_results(0.44, 2.99), diff=False)
    assert "pod-1  ok           nothing would change; $0.44/h\n" in text
    assert "pod-2  ok           nothing would change; $2.99/h\n" in text
    assert text.splitlines()[-1].endswith("; $3.43/h in all; exit 0")
    partly = reports.table(_results(0.44, None), diff=False)
    assert "nothing would change; price unknown\n" in partly
    assert "$0.44/h for 1 pod(s), 1 pod(s) of unknown price; exit 0" in partly


def test_markdown_has_a_cost_column_and_the_total():
    md = markdown.markdown(_results(0.5, None))
    assert "| pod-1 | ok | nothing would change | $0.50/h |" in md
    assert "| pod-2 | ok | nothing would change | price unknown |" in md
    assert "$0.50/h for 1 pod(s), 1 pod(s) of unknown price" in md
    assert usage.money(0.004) == "$0.004"


def test_the_sandbox_api_prices_running_pods_and_reads_their_gpus(fleet):
    doc = list_pods(fleet.state)
    assert_valid(doc)
    by_name = {pod["name"]: pod for pod in doc["pods"]}
    assert by_name["pod-1"]["cost"] == shape_for(1).cost_per_hour == 0.68
    assert by_name["pod-2"]["runtime"]["gpus"] == [{"util": 0, "memoryUtil": 0}] * 8


def test_check_reports_each_pods_price_and_the_total(fleet, tmp_path):
    report = tmp_path / "r.json"
    result = check(fleet, "--json", str(report), env=fleet.api_env(tmp_path / "hostkeys"))
    doc = json.loads(report.read_text())
    assert doc["pods"]["pod-1"]["cost_per_hour"] == 0.68, result.stderr
    assert doc["pods"]["pod-2"]["cost_per_hour"] == 23.92
    assert doc["summary"]["cost_per_hour"] == pytest.approx(24.6)
    assert "; $24.60/h in all; exit" in result.stdout


def test_a_pods_file_price_is_shown_and_a_missing_one_is_unknown(fleet, tmp_path):
    pods = json.loads(json.dumps(fleet.pods))
    pods["pod-1"]["cost_per_hour"] = 0.5
    pods_file = tmp_path / "pods.yaml"
    pods_file.write_text(json.dumps({"pods": pods}))
    report = tmp_path / "r.json"
    check(fleet, "--json", str(report), pods_file=pods_file)
    doc = json.loads(report.read_text())
    assert doc["pods"]["pod-1"]["cost_per_hour"] == 0.5
    assert doc["pods"]["pod-2"]["cost_per_hour"] is None
    assert doc["summary"]["cost_per_hour"] is None


@pytest.mark.parametrize("value", ["-1", '"cheap"', "true"])
def test_a_bad_pods_file_price_is_one_line(fleet, tmp_path, value):
    pods_file = tmp_path / "pods.yaml"
    pods_file.write_text(f"pods:\n  a:\n    ssh_hostname: 127.0.0.1\n    cost_per_hour: {value}\n")
    result = check(fleet, pods_file=pods_file)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "pods.a.cost_per_hour: expected a price in USD per hour" in result.stderr
