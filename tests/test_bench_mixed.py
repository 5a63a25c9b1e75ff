"""The fleet benchmark's mixed fleet (bench/fleet/mixed.py): its vars and its rows in the report,
checked on the raw results of a run without running the benchmark."""

from __future__ import annotations

import copy
import json

from bench.fleet.mixed import mixed, mixed_vars, split
from bench.fleet.report import report
from tests.e2e import ROOT

RAW = json.loads((ROOT / "bench" / "results" / "fleet.json").read_text())


def _with_mixed(floor_s: float, check_s: float) -> dict:
    raw = copy.deepcopy(RAW)
    raw["settings"]["mixed_runs"] = 1
    for sample in raw["samples"]:
        scale = sample["pods"] / 8
        for step, seconds in (("mixed_floor", floor_s), ("mixed_check", check_s)):
            commands = {"min": 1, "max": 1, "mean": 1.0}
            sample["steps"][step] = {"seconds": seconds * scale, "commands": commands}
    return raw


def test_the_report_shows_the_mixed_fleets_check_against_its_floor():
    text = report(_with_mixed(1.0, 1.25))
    counts = RAW["settings"]["pod_counts"]
    floors = " | ".join(f"{n / 8:.2f}" for n in counts)
    assert (
        f"| mixed fleet's floor: `ssh pod true`, every pod and instance at once ⁵ | {floors} |"
        in text
    )
    assert "| mixed fleet: `podstate check`, half of it Vast instances ⁵ |" in text
    ratios = " | ".join("1.25" for _ in counts)
    assert f"| *mixed fleet: check / its floor* | {ratios} | | | |" in text
    assert "the mixed fleet: 1)" in text and "⁵ **A mixed fleet.**" in text


def test_a_run_without_the_mixed_fleet_has_no_rows_of_it():
    raw = copy.deepcopy(RAW)
    raw["settings"]["mixed_runs"] = 0
    for sample in raw["samples"]:
        for step in ("mixed_floor", "mixed_check"):
            sample["steps"].pop(step, None)
    text = report(raw)
    assert "mixed fleet: `podstate check`" not in text
    assert "*mixed fleet: check / its floor*" not in text


def test_a_mixed_fleet_is_half_vast_and_every_small_shm_is_waived(tmp_path):
    assert [split(n) for n in (1, 2, 5, 8)] == [(1, 0), (1, 1), (3, 2), (4, 4)]
    assert mixed(1, 0.0) == {}  # no fleet of both kinds: nothing started
    target = mixed_vars(tmp_path, 9)  # pod-1..5, vast-1..4
    small = sorted(p.name for p in (target / "host_vars").iterdir())
    assert small == ["pod-3.yaml", "vast-2.yaml", "vast-4.yaml"]
    assert (target / "host_vars" / "vast-2.yaml").read_text() == "shm: {min_size: 32M}\n"
