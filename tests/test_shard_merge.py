"""``podstate report merge`` refuses a set of shard reports that is not shards 1 to N of one
N, each once: each shard report records its K/N. Through the real command, on report files
written by the check's own writer (``result.to_json``); the set logic as a property."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate.check import merge, result
from podstate.check.result import PodResult
from podstate.check.shards import Shard, shard_of
from tests.e2e import BIN, ROOT

SCHEMA = json.loads((ROOT / "schema/check-report.schema.json").read_text())
FLEET = [f"pod-{i}" for i in range(1, 13)]
DRIFT = PodResult(
    status="drift",
    changes=[{"role": "Environment", "operation": "profile", "file": "deploy/pod.py"}],
)


def fleet_results() -> dict[str, PodResult]:
    """Return the whole fleet's results: pod-1 drifted, every other pod ok."""
    return {name: DRIFT if name == "pod-1" else PodResult() for name in FLEET}


def write(directory: Path, name: str, shard: Shard | None, checked_at: str | None = None) -> str:
    """Write the JSON report ``check --shard K/N --json`` writes for ``shard`` of the fleet
    (the whole fleet for None), as the check does, read at ``checked_at`` (None: a report
    that does not say, as format 5's did); return its file name."""
    results = fleet_results()
    if shard is not None:
        results = {n: r for n, r in results.items() if shard_of(n, shard.count) == shard.index}
    document = result.to_json(results, shard, checked_at)
    jsonschema.validate(document, SCHEMA)
    (directory / name).write_text(json.dumps(document, indent=2) + "\n")
    return name


def merged(directory: Path, *reports: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``podstate report merge all.json REPORTS...`` in ``directory``; return the run and
    the merged report."""
    run = subprocess.run(
        [str(BIN / "podstate"), "report", "merge", "all.json", *reports],
        cwd=directory,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    document = json.loads((directory / "all.json").read_text())
    jsonschema.validate(document, SCHEMA)
    return run, document


def test_a_shard_report_records_its_shard_and_a_whole_check_none(tmp_path):
    write(tmp_path, "s.json", Shard(2, 3))
    write(tmp_path, "w.json", None)
    assert json.loads((tmp_path / "s.json").read_text())["shard"] == {"index": 2, "count": 3}
    assert json.loads((tmp_path / "w.json").read_text())["shard"] is None
    assert json.loads((tmp_path / "s.json").read_text())["format_version"] == 6


def test_a_merge_is_as_old_as_its_oldest_shard(tmp_path):
    """The merged report says when its pods were read: at the oldest shard's check, since
    its pods are that old; where a shard's report does not say, neither does the merge."""
    times = {1: "2026-12-05T10:02:03Z", 2: "2026-12-05T09:59:59Z", 3: "2026-12-05T10:30:00Z"}
    paths = [write(tmp_path, f"shard-{k}.json", Shard(k, 3), times[k]) for k in (1, 2, 3)]
    run, document = merged(tmp_path, *paths)
    assert run.returncode == 2 and document["checked_at"] == "2026-12-05T09:59:59Z"
    paths[1] = write(tmp_path, "shard-2.json", Shard(2, 3), None)
    run, document = merged(tmp_path, *paths)
    assert run.returncode == 2 and "checked_at" not in document


@given(st.floats(min_value=0, max_value=4e9), st.floats(min_value=0, max_value=4e9))
@settings(max_examples=200, deadline=None)
def test_a_stamp_is_valid_and_sorts_as_the_times_do(a: float, b: float):
    one, two = result.stamp(a), result.stamp(b)
    jsonschema.validate(result.to_json({}, None, one), SCHEMA)
    if int(a) != int(b):
        assert (one < two) == (a < b)


def test_a_whole_set_merges_into_the_whole_fleets_report(tmp_path):
    paths = [write(tmp_path, f"shard-{k}.json", Shard(k, 3)) for k in (3, 1, 2)]
    run, document = merged(tmp_path, *paths)
    assert run.returncode == 2, run.stderr  # pod-1's drift
    assert run.stderr == ""
    assert document == result.to_json(fleet_results())  # shard null: the whole fleet


def test_a_shard_that_wrote_nothing_fails_the_merge_naming_it(tmp_path):
    """The CI case: shard-*.json after shard 2 of 3 wrote no report."""
    paths = [write(tmp_path, f"shard-{k}.json", Shard(k, 3)) for k in (1, 3)]
    run, document = merged(tmp_path, *paths)
    assert run.returncode == 1
    assert run.stderr == "podstate: shard 2/3 missing: no report given is of it\n"
    assert document["pods"]["shard 2/3"]["status"] == "error"
    assert document["summary"]["exit_code"] == 1
    kept = {n for n in FLEET if shard_of(n, 3) != 2}
    assert set(document["pods"]) == kept | {"shard 2/3"}


def test_every_missing_shard_is_named(tmp_path):
    run, _ = merged(tmp_path, write(tmp_path, "shard-2.json", Shard(2, 4)))
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"podstate: shard {k}/4 missing: no report given is of it" for k in (1, 3, 4)
    ]


def test_a_shard_given_twice_is_an_error_and_its_pods_count_once(tmp_path):
    paths = [write(tmp_path, f"shard-{k}.json", Shard(k, 2)) for k in (1, 2)]
    again = write(tmp_path, "again.json", Shard(2, 2))
    run, document = merged(tmp_path, *paths, again)
    assert run.returncode == 1
    assert run.stderr == (
        "podstate: shard report again.json: shard 2/2 again (shard-2.json is too): left out\n"
    )
    assert {n: p["status"] for n, p in document["pods"].items() if n in FLEET} == {
        n: "drift" if n == "pod-1" else "ok" for n in FLEET
    }
    assert document["summary"]["error"] == 1


def test_shards_of_different_n_are_an_error(tmp_path):
    paths = [write(tmp_path, f"shard-{k}.json", Shard(k, 2)) for k in (1, 2)]
    other = write(tmp_path, "of-three.json", Shard(1, 3))
    run, _ = merged(tmp_path, *paths, other)
    assert run.returncode == 1
    assert run.stderr == (
        "podstate: shard report of-three.json: shard 1/3, but shard-1.json is shard 1/2: "
        "shards of different N do not make one fleet; left out\n"
    )


def test_a_whole_check_among_shard_reports_is_an_error(tmp_path):
    whole = write(tmp_path, "whole.json", None)
    paths = [write(tmp_path, f"shard-{k}.json", Shard(k, 2)) for k in (1, 2)]
    run, document = merged(tmp_path, whole, *paths)
    assert run.returncode == 1
    assert run.stderr == (
        "podstate: shard report whole.json: a check of the whole fleet (no --shard), among "
        "shard reports (shard-1.json is shard 1/2): left out\n"
    )
    assert not any(p["status"] == "error" for n, p in document["pods"].items() if n in FLEET)


def test_reports_without_a_shard_merge_as_before(tmp_path):
    """Checks without --shard (or of format 4, which has no ``shard``): no set to be whole."""
    results = fleet_results()
    for name, part, version in (("a.json", FLEET[:6], 5), ("b.json", FLEET[6:], 4)):
        document = result.to_json({n: results[n] for n in part})
        if version == 4:
            del document["shard"]
            document["format_version"] = 4
        jsonschema.validate(document, SCHEMA)
        (tmp_path / name).write_text(json.dumps(document))
    run, document = merged(tmp_path, "a.json", "b.json")
    assert (run.returncode, run.stderr) == (2, "")
    assert document == result.to_json(results)


def test_a_shard_past_its_count_is_no_report(tmp_path):
    document = result.to_json({}, Shard(1, 2))
    document["shard"] = {"index": 3, "count": 2}
    (tmp_path / "bad.json").write_text(json.dumps(document))
    run, _ = merged(tmp_path, "bad.json")
    assert run.returncode == 1
    assert run.stderr == (
        "podstate: shard report bad.json not a podstate check report "
        "(shard: {'index': 3, 'count': 2})\n"
    )


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(1, 5),
    given_shards=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), max_size=8),
)
def test_a_merge_passes_only_a_whole_set_and_names_each_shard_missing(count, given_shards):
    """For any list of shard reports (K/N pairs, K <= N), the merge has no error exactly when
    they are shards 1..N of one N, each once; and each shard of the first report's N that
    none is of is named."""
    shards = [Shard(min(k, n), n) for k, n in given_shards] or [Shard(1, count)]
    reports = [
        merge.Report(
            f"{i}.json",
            {n: PodResult() for n in FLEET if shard_of(n, s.count) == s.index},
            shard=s,
        )
        for i, s in enumerate(shards)
    ]
    results = merge.merge(reports)
    errors = merge.problems(results)
    n = shards[0].count
    whole = sorted(s.index for s in shards) == list(range(1, n + 1)) and all(
        s.count == n for s in shards
    )
    assert (errors == []) == whole
    assert (result.exit_code(results) == 1) == (not whole)
    present = {s.index for s in shards if s.count == n}
    assert {e for e in errors if " missing" in e} == {
        f"shard {k}/{n} missing: no report given is of it"
        for k in range(1, n + 1)
        if k not in present
    }
    assert all(r.status == "ok" for name, r in results.items() if name in FLEET)
