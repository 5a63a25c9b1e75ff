"""Sharding a fleet across CI runners and merging the shards' reports: pure logic, then
``podstate check --shard`` and ``podstate report merge`` end to end on sandbox pods."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import jsonschema
import pytest
from junitparser import Failure, JUnitXml

from podstate.check import merge, shards
from podstate.check.reports import junit
from podstate.check.result import PodResult, from_json, to_json
from tests.e2e import BIN, ROOT, apply, check, exec_count, junit_errors, run

SANDBOX = {"pods": 4}
REPORT_SCHEMA = json.loads((ROOT / "schema/check-report.schema.json").read_text())
NAMES = [f"pod-{i}" for i in range(1, 2001)]


# --- the shard function -------------------------------------------------------------------


def test_shard_of_is_stable_across_processes():
    """Python's hash() is salted per process; the shard must not be."""
    here = [shards.shard_of(name, 7) for name in NAMES[:50]]
    code = (
        "from podstate.check import shards; "
        "print([shards.shard_of(f'pod-{i}', 7) for i in range(1, 51)])"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [str(BIN / "python"), "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
            cwd=ROOT,
        )
        assert json.loads(out.stdout) == here
    assert shards.shard_of("pod-1", 4) == shards.shard_of("pod-1", 4)


def test_shards_partition_the_fleet_evenly():
    for count in (1, 2, 4, 7):
        sizes = Counter(shards.shard_of(name, count) for name in NAMES)
        assert set(sizes) == set(range(1, count + 1))
        assert sum(sizes.values()) == len(NAMES)
        mean = len(NAMES) / count
        assert all(abs(size - mean) < 0.15 * mean for size in sizes.values()), sizes
        chosen = [shards.select(NAMES, shards.Shard(k, count)) for k in range(1, count + 1)]
        assert sorted(n for part in chosen for n in part) == sorted(NAMES)  # each pod once


def test_adding_a_pod_moves_only_that_pod():
    before = {name: shards.shard_of(name, 4) for name in NAMES}
    after = {name: shards.shard_of(name, 4) for name in [*NAMES, "gpu-new-1"]}
    assert {n: s for n, s in after.items() if n in before} == before
    assert 1 <= after["gpu-new-1"] <= 4


@pytest.mark.parametrize(
    "text", ["0/4", "5/4", "1/0", "4", "a/b", "-1/2", "1/2/3", "", "١/٢", "1/" + "9" * 5000]
)
def test_a_bad_shard_is_one_line(text):
    with pytest.raises(shards.ShardError) as raised:
        shards.parse(text)
    assert "\n" not in str(raised.value) and "--shard" in str(raised.value)


def test_a_good_shard_parses():
    assert shards.parse("3/4") == shards.Shard(3, 4)
    assert shards.parse(" 1 / 1 ") == shards.Shard(1, 1)
    assert str(shards.Shard(2, 5)) == "2/5"


# --- merging reports, from JSON documents ------------------------------------------------


def _report(pods: dict[str, PodResult]) -> dict:
    document = to_json(pods)
    jsonschema.validate(document, REPORT_SCHEMA)
    return document


def _from(document: dict) -> dict[str, PodResult]:
    return from_json(document)


DRIFT = PodResult(
    status="drift",
    changes=[
        {"role": "Environment", "operation": "profile", "file": "deploy/pod.py", "diff": "+x"}
    ],
    checked=["Environment"],
    host_key={"trust": "first-use", "fingerprint": "SHA256:abc"},
)
VIOLATION = PodResult(
    status="violation", violations=[{"role": "Shared memory", "id": "shm.min_size", "message": "m"}]
)


def test_merging_shards_gives_the_whole_fleets_report():
    one = _report({"pod-1": PodResult(), "pod-2": DRIFT})
    two = _report({"pod-3": PodResult()})
    merged = to_json(
        merge.merge([merge.Report("1.json", _from(one)), merge.Report("2.json", _from(two))])
    )
    jsonschema.validate(merged, REPORT_SCHEMA)
    assert (
        merged["pods"]
        == to_json({"pod-1": PodResult(), "pod-2": DRIFT, "pod-3": PodResult()})["pods"]
    )
    assert merged["summary"] == {
        "pods": 3,
        "ok": 2,
        "drift": 1,
        "restarted": 0,
        "busy": 0,
        "violation": 0,
        "unreachable": 0,
        "error": 0,
        "exit_code": 2,
        "host_keys": {"verified": 0, "first_use": 1, "rekeyed": 0, "refused": 0},
        "cost_per_hour": None,  # no pod has a known price
        "cost_unknown": 3,
    }


BUSY = PodResult(status="busy", holder="ci-7 pid 41 since 2026-12-01T10:00:00+0000")


def test_a_busy_pod_in_a_shard_is_busy_in_the_merge_with_its_holder_and_exit_2():
    one = _report({"pod-1": PodResult(), "pod-2": BUSY})
    two = _report({"pod-3": PodResult()})
    merged = merge.merge([merge.Report("1.json", _from(one)), merge.Report("2.json", _from(two))])
    assert merged["pod-2"].status == "busy" and merged["pod-2"].holder == BUSY.holder
    document = to_json(merged)
    jsonschema.validate(document, REPORT_SCHEMA)
    assert document["summary"]["busy"] == 1 and document["summary"]["exit_code"] == 2
    assert "another podstate run is changing it (ci-7 pid 41" in junit(merged)
    worse = merge.merge(
        [
            merge.Report("1.json", _from(one)),
            merge.Report("3.json", _from(_report({"x": VIOLATION}))),
        ]
    )
    assert to_json(worse)["summary"]["exit_code"] == 1


def test_the_worst_shard_sets_the_exit_status():
    one = _report({"pod-1": DRIFT})
    two = _report({"pod-2": VIOLATION})
    merged = to_json(merge.merge([merge.Report("a", _from(one)), merge.Report("b", _from(two))]))
    assert merged["summary"]["exit_code"] == 1
    empty = to_json(merge.merge([merge.Report("a", _from(_report({})))]))
    assert empty["summary"]["exit_code"] == 0 and empty["pods"] == {}


def test_a_missing_shard_is_an_error_entry_naming_its_file():
    one = _report({"pod-1": PodResult()})
    merged = merge.merge(
        [merge.Report("1.json", _from(one)), merge.Report("2.json", None, "missing: no such file")]
    )
    document = to_json(merged)
    jsonschema.validate(document, REPORT_SCHEMA)
    entry = document["pods"]["shard report 2.json"]
    assert entry["status"] == "error"
    assert entry["error"] == "shard report 2.json missing: no such file"
    assert document["summary"]["error"] == 1 and document["summary"]["exit_code"] == 1
    assert merge.problems(merged) == ["shard report 2.json missing: no such file"]


def test_a_pod_in_two_reports_is_an_error():
    one = _report({"pod-1": PodResult()})
    merged = merge.merge([merge.Report("a.json", _from(one)), merge.Report("b.json", _from(one))])
    assert merged["pod-1"].status == "error"
    assert "a.json and b.json" in merged["pod-1"].error


def test_unreadable_reports_say_why(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_report({"pod-1": DRIFT})))
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"pods": {}, "summary": {}}))
    (tmp_path / "dir.json").mkdir()
    paths = [str(tmp_path / n) for n in ("good.json", "garbage.json", "other.json", "dir.json")]
    merged = merge.merge([merge.load(p) for p in [*paths, str(tmp_path / "gone.json")]])
    errors = {n: r.error for n, r in merged.items() if r.status == "error"}
    assert errors[f"shard report {paths[1]}"].endswith(
        "unreadable: not JSON (Expecting property name enclosed in double quotes, line 1)"
    )
    assert "not a podstate check report" in errors[f"shard report {paths[2]}"]
    assert "unreadable" in errors[f"shard report {paths[3]}"]
    assert errors[f"shard report {tmp_path}/gone.json"].endswith("missing: no such file")
    assert merged["pod-1"].changes == DRIFT.changes


def test_merge_command_writes_reports_and_exits_with_the_fleets_status(tmp_path):
    (tmp_path / "1.json").write_text(json.dumps(_report({"pod-1": PodResult(), "pod-2": DRIFT})))
    (tmp_path / "2.json").write_text(json.dumps(_report({"pod-3": VIOLATION})))
    command = [str(BIN / "podstate"), "report", "merge", "all.json", "1.json", "2.json"]
    command += ["--junit", "all.xml", "--markdown", "all.md"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    document = json.loads((tmp_path / "all.json").read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    assert document["summary"]["pods"] == 3
    assert junit_errors(tmp_path / "all.xml") == []
    cases = [c for suite in JUnitXml.fromfile(str(tmp_path / "all.xml")) for c in suite]
    failed = {(c.classname, c.name) for c in cases if any(isinstance(r, Failure) for r in c.result)}
    assert failed == {("pod-2", "Environment"), ("pod-3", "Shared memory")}
    assert ("pod-1", "podstate check") in {(c.classname, c.name) for c in cases}
    assert "pod-3" in (tmp_path / "all.md").read_text()

    result = subprocess.run(
        [str(BIN / "podstate"), "report", "merge", "all.json", "1.json", "3.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr == "podstate: shard report 3.json missing: no such file\n"
    document = json.loads((tmp_path / "all.json").read_text())
    assert document["summary"]["error"] == 1 and document["summary"]["drift"] == 1


@pytest.mark.parametrize("command", ["check", "inventory"])
@pytest.mark.parametrize("value", ["5/4", "x", ""])
def test_check_refuses_a_bad_shard_in_one_line(command, value):
    """An empty K/N (a CI matrix's variable unset) is refused too: taken as no shard, every
    runner of the matrix would check the whole fleet."""
    result = subprocess.run(
        [str(BIN / "podstate"), command, "--shard", value],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"podstate: --shard {value}: ")


# --- end to end on sandbox pods ----------------------------------------------------------


@pytest.fixture(scope="module")
def drifted(fleet):
    """Four converged sandbox pods (pod-3's small /dev/shm accepted), pod-1 edited by hand."""
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    converged = apply(fleet)
    assert converged.returncode == 0, converged.stderr
    fleet.out("pod-1", "sed -i 's|/scratch/pip|/workspace/pip|' /etc/profile.d/podstate.sh")
    return fleet


def _timeless(document: dict) -> dict:
    """Return ``document`` without when it was read and each pod's readings of the moment
    (idle or in use, and the idle clock the probe keeps on the pod), which the shards'
    checks, made after the whole one, read anew."""
    document.pop("checked_at")
    for entry in document["pods"].values():
        entry.pop("activity", None)
        entry.pop("idle", None)
    return document


def test_two_shards_merged_equal_the_whole_check(drifted, tmp_path):
    whole = check(drifted, "--json", str(tmp_path / "whole.json"))
    assert whole.returncode == 2, whole.stdout + whole.stderr
    parts = []
    for k in (1, 2):
        out = tmp_path / f"shard-{k}.json"
        part = check(drifted, "--shard", f"{k}/2", "--json", str(out))
        assert part.returncode in (0, 2), part.stdout + part.stderr
        parts.append(json.loads(out.read_text()))
    assert [p["shard"] for p in parts] == [{"index": k, "count": 2} for k in (1, 2)]
    names = [set(p["pods"]) for p in parts]
    assert not names[0] & names[1] and names[0] | names[1] == set(drifted.pods)
    assert names[0] == set(shards.select(list(drifted.pods), shards.Shard(1, 2)))
    merged = run(
        drifted,
        [str(BIN / "podstate"), "report", "merge", str(tmp_path / "all.json")]
        + [str(tmp_path / f"shard-{k}.json") for k in (1, 2)]
        + ["--junit", str(tmp_path / "all.xml")],
    )
    assert merged.returncode == 2, merged.stdout + merged.stderr
    document = json.loads((tmp_path / "all.json").read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    whole_document = json.loads((tmp_path / "whole.json").read_text())
    assert document["checked_at"] == min(p["checked_at"] for p in parts)  # the oldest shard's
    assert _timeless(document) == _timeless(whole_document)

    lost = run(
        drifted,
        [str(BIN / "podstate"), "report", "merge", str(tmp_path / "lost.json")]
        + [str(tmp_path / "shard-1.json"), str(tmp_path / "shard-9.json")],
    )
    assert lost.returncode == 1
    assert f"shard report {tmp_path}/shard-9.json missing" in lost.stderr
    assert "podstate: shard 2/2 missing: no report given is of it" in lost.stderr.splitlines()
    document = json.loads((tmp_path / "lost.json").read_text())
    assert document["summary"]["error"] == 2  # the file, and the shard no report is of


def test_shard_composes_with_limit_and_lists_for_pyinfra(drifted, tmp_path):
    listed = run(drifted, [str(BIN / "podstate"), "inventory", "--shard", "1/2", "--names"])
    assert listed.returncode == 0, listed.stderr
    names = listed.stdout.split()
    assert set(names) == set(shards.select(list(drifted.pods), shards.Shard(1, 2)))
    limits = [arg for name in names for arg in ("--limit", name)]
    before = {pod: exec_count(drifted, pod) for pod in drifted.pods}
    applied = apply(drifted, *limits)  # the README's recipe for a sharded apply
    assert applied.returncode == 0, applied.stderr
    contacted = {pod for pod in drifted.pods if exec_count(drifted, pod) > before[pod]}
    assert contacted == set(names)
    assert "pod-1" not in names  # pod-1's drift stays for the other tests
    out = tmp_path / "one.json"
    limited = check(drifted, "--limit", names[0], "--shard", "1/2", "--json", str(out))
    assert limited.returncode in (0, 2), limited.stdout + limited.stderr
    assert set(json.loads(out.read_text())["pods"]) == {names[0]}
    other = next(p for p in drifted.pods if p not in names)
    empty = check(drifted, "--limit", other, "--shard", "1/2", "--json", str(out))
    assert empty.returncode == 0, empty.stdout + empty.stderr  # nothing of it in this shard
    assert json.loads(out.read_text())["summary"]["pods"] == 0


def test_the_sharded_workflows_steps_merge_into_the_whole_fleets_report(drifted, tmp_path):
    """The example's check step for each matrix value, its reports carried to the merge job
    as its artifacts are, then its merge step: one report, exit 2 for pod-1's drift."""
    import yaml

    from tests.test_ci import SHARDED, bash, workspace

    workflow = yaml.safe_load(SHARDED.read_text())
    jobs = workflow["jobs"]
    (step,) = [s for s in jobs["check"]["steps"] if "podstate check" in s.get("run", "")]
    (merge,) = [s for s in jobs["merge"]["steps"] if "report merge" in s.get("run", "")]
    matrix = jobs["check"]["strategy"]["matrix"]["shard"]
    assert len(matrix) == int(workflow["env"]["SHARDS"])
    env = {**drifted.env(), **workflow["env"], "PATH": f"{BIN}:/usr/bin:/bin"}
    merged = workspace(tmp_path / "merge")
    (merged / "shards").mkdir()
    for shard in matrix:
        where = workspace(tmp_path / f"shard-{shard}")
        result = bash(step["run"], where, {**env, "SHARD": str(shard)})
        assert result.returncode == 0, result.stdout + result.stderr
        report = where / f"podstate-check-{shard}.json"
        (merged / "shards" / report.name).write_bytes(report.read_bytes())
    summary = merged / "summary.md"
    result = bash(merge["run"], merged, {**env, "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.returncode == 2, result.stdout + result.stderr
    document = json.loads((merged / "podstate-check.json").read_text())
    assert {n: p["status"] for n, p in document["pods"].items()} == {
        "pod-1": "drift",
        **{n: "ok" for n in drifted.pods if n != "pod-1"},
    }
    assert summary.read_text() == (merged / "podstate-check.md").read_text()

    (merged / "shards" / "podstate-check-3.json").unlink()  # a shard job that never reported
    result = bash(merge["run"], merged, {**env, "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.returncode == 1
    assert "shard report shards/podstate-check-3.json missing" in result.stderr
    assert f"podstate: shard 3/{len(matrix)} missing" in result.stderr
