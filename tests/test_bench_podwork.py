"""bench/fleet/podwork.py's figures (bench/fleet/podwork_figures.py): the probe and the
fold derived from each pod's own measures, the grid of declared files and processes in its
table, and the targets' verdicts over every cell (pure logic, on measures written here)."""

from __future__ import annotations

from typing import Any

from bench.fleet import podwork_figures
from bench.fleet.report import pod_work_page
from bench.fleet.targets import pod_work_targets


def _m(ms: float, programs: int) -> dict[str, Any]:
    return {"cpu_s": ms / 1000, "programs": programs, "by_program": {"sh": programs}}


def _cell(files: int, processes: int, check_ms: float, reconfigure_ms: float) -> dict[str, Any]:
    measures = {
        "ssh true": _m(10, 2),
        "check": _m(check_ms, 10),
        "reconfigure": _m(reconfigure_ms, 24),
    }
    return {"files": files, "processes": processes, "measures": measures}


def _raw(grid_check_ms: float) -> dict[str, Any]:
    pod = {
        "ssh true": _m(10, 2),
        "check": _m(25, 10),
        "check, first probe": _m(40, 19),
        "reconfigure": _m(45, 24),
        "nvidia-smi query": _m(15, 4),
    }
    return {
        "runs": 3,
        "pods": {"pod-1": pod},
        "grid": [_cell(1, 0, 25, 45), _cell(200, 200, grid_check_ms, grid_check_ms + 20)],
    }


def test_a_grid_cell_derives_the_probe_and_the_fold_without_the_gpu_measures():
    found = podwork_figures.derived(_cell(20, 200, 30, 52)["measures"])
    assert set(found) == {"probe", "fold of a reconfigure"}
    assert round(1000 * found["probe"]["cpu_s"]) == 20
    assert round(1000 * found["fold of a reconfigure"]["cpu_s"]) == 22
    assert found["fold of a reconfigure"]["programs"] == 14


def test_the_targets_hold_only_if_every_cell_meets_them():
    met = pod_work_targets(_raw(grid_check_ms=25))
    assert "**met**" in met[0] and "on 200 files, 200 more processes" in met[0]
    missed = pod_work_targets(_raw(grid_check_ms=60))  # its probe: 50 ms
    assert "**missed**" in missed[0] and "50 ms on 200 files, 200 more processes" in missed[0]
    assert "**met**" in missed[2]  # its fold is still 20 ms


def test_the_page_shows_each_cell_of_the_grid():
    page = pod_work_page(_raw(grid_check_ms=60))
    assert "| 200 | 200 | 10.0 | 60.0 | 50.0 | 80.0 | 20.0 | 10, 14 |" in page
    assert "| 1 | 0 | 10.0 | 25.0 | 15.0 | 45.0 | 20.0 | 10, 14 |" in page
    assert "cgroup" in page


def test_results_from_before_the_grid_still_make_a_page():
    raw = _raw(25)
    del raw["grid"]
    assert "probe, first of a container" in pod_work_page(raw)
