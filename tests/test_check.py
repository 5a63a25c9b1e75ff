"""End to end: ``podstate check`` on sandbox pods reports drift without changing anything."""

import json
import time
from pathlib import Path

import jsonschema
import pytest
from junitparser import Error, Failure, JUnitXml
from pyinfra.api import Inventory

from podstate.check.result import stamp
from podstate.check.runner import CheckFailed, _limit
from podstate.sandbox import container
from tests.e2e import ROOT, apply, check, exec_count, junit_errors

# What a check could change if it wrote anything: managed files and directories.
SNAPSHOT = (
    "cat /etc/profile.d/podstate.sh ~/.bashrc; "
    "stat -c '%n %a %s %Y %i' /scratch /scratch/* ~/.bashrc "
    "/etc/profile.d/podstate.sh; grep ' /scratch \\| /dev/shm ' /proc/self/mounts"
)
REPORT_SCHEMA = json.loads((ROOT / "schema/check-report.schema.json").read_text())


def report(tmp_path: Path, fleet, *args: str):
    """Run the check with JSON and JUnit output; return (process, json, junit)."""
    out = tmp_path / "check.json"
    xml = tmp_path / "check.xml"
    began = stamp(time.time())
    result = check(fleet, "--json", str(out), "--junit", str(xml), *args)
    assert "Traceback" not in result.stderr + result.stdout
    document = json.loads(out.read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    assert began <= document["checked_at"] <= stamp(time.time())  # when it read the pods
    assert junit_errors(xml) == []
    cases = [case for suite in JUnitXml.fromfile(str(xml)) for case in suite]
    return result, document, cases


LIMIT_INVENTORY = Inventory(
    (["train-1", "train-2", "eval-1", "train,eval"], {}),
    trainers=(["train-1", "train-2"], {}),
    train_x=(["eval-1"], {}),
)


@pytest.mark.parametrize(
    ("limits", "chosen"),
    [
        ([], None),
        (["trainers"], ["train-1", "train-2"]),  # a group's name: its pods
        (["train-*"], ["train-1", "train-2"]),  # else a glob of pod names
        (["train_*"], []),  # ... and never of group names, as in pyinfra
        (["eval-1", "train-2"], ["train-2", "eval-1"]),  # repeated: in the inventory's order
        (["train,eval"], ["train,eval"]),  # a comma is part of the pattern
    ],
)
def test_limit_chooses_pods_as_pyinfras_limit_does(limits, chosen):
    if chosen == []:
        with pytest.raises(CheckFailed, match=r"^--limit train_\* matches no pod$"):
            _limit(LIMIT_INVENTORY, limits)
        return
    found = _limit(LIMIT_INVENTORY, limits)
    assert found is None if chosen is None else [host.name for host in found] == chosen


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        (["train-1", "nosuch"], "--limit nosuch"),
        (["trainers", "train_*", "eval-*", "nobody"], "--limit train_* --limit nobody"),
    ],
)
def test_each_limit_that_matches_no_pod_is_an_error_naming_it(limits, named):
    """A CI filter that checks fewer pods than it names must not pass."""
    with pytest.raises(CheckFailed) as raised:
        _limit(LIMIT_INVENTORY, limits)
    assert str(raised.value) == f"{named} matches no pod"


def test_limit_with_commas_that_matches_nothing_says_to_repeat_it():
    with pytest.raises(CheckFailed) as raised:
        _limit(LIMIT_INVENTORY, ["train-1,eval-1"])
    assert str(raised.value) == (
        "--limit train-1,eval-1 matches no pod: a comma is part of a name, as in pyinfra; "
        "repeat --limit for each pod"
    )


@pytest.fixture(scope="module")
def converged(fleet):
    """The fleet converged, with pod-3's small /dev/shm accepted so it is ok too."""
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    return fleet


def test_converged_fleet_is_ok(converged, tmp_path):
    result, document, _ = report(tmp_path, converged)
    assert result.returncode == 0, result.stdout
    assert {p["status"] for p in document["pods"].values()} == {"ok"}
    assert document["summary"]["ok"] == 5


def test_check_runs_one_read_only_command_per_pod(converged, tmp_path):
    before = {pod: converged.out(pod, SNAPSHOT) for pod in converged.pods}
    counts = {pod: exec_count(converged, pod) for pod in converged.pods}
    report(tmp_path, converged)
    after = {pod: exec_count(converged, pod) for pod in converged.pods}
    assert {pod: after[pod] - counts[pod] for pod in after} == {pod: 1 for pod in after}
    assert {pod: converged.out(pod, SNAPSHOT) for pod in converged.pods} == before


@pytest.fixture(scope="module")
def tampered(converged, tmp_path_factory):
    """Three pods changed by hand, one way each; returns each pod's snapshot after that."""
    fleet = converged
    fleet.out("pod-1", "sed -i 's|/scratch/pip|/workspace/pip|' /etc/profile.d/podstate.sh")
    fleet.out("pod-2", "rmdir /scratch/uv")
    fleet.out("pod-4", "echo 'export TMPDIR=/workspace/tmp' >> ~/.bashrc")
    snapshots = {pod: fleet.out(pod, SNAPSHOT) for pod in fleet.pods}
    result = report(tmp_path_factory.mktemp("tampered"), fleet, "--diff")
    return snapshots, result


def test_drift_names_exactly_the_changed_pods(tampered):
    _, (result, document, _) = tampered
    assert result.returncode == 2, result.stdout
    status = {name: pod["status"] for name, pod in document["pods"].items()}
    assert status == {
        "pod-1": "drift",
        "pod-2": "drift",
        "pod-3": "ok",
        "pod-4": "drift",
        "pod-5": "ok",
    }


@pytest.mark.parametrize(
    "pod,operation,diff_line",
    [
        ("pod-1", "Profile /etc/profile.d/podstate.sh", "+export PIP_CACHE_DIR=/scratch/pip"),
        ("pod-2", "Directories named in dirs", None),
        ("pod-4", "Hooks in ~/.bashrc", "-export TMPDIR=/workspace/tmp"),
    ],
)
def test_drift_says_role_operation_and_diff(tampered, pod, operation, diff_line):
    _, (result, document, _) = tampered
    (change,) = document["pods"][pod]["changes"]
    assert change["role"] == "Environment"
    assert change["operation"] == operation
    if diff_line:
        assert diff_line in change["diff"].splitlines()
        assert diff_line in result.stdout  # --diff shows it on the terminal too
    else:
        assert "diff" not in change


def test_drifted_pods_are_unchanged_by_the_check(tampered, converged):
    snapshots, _ = tampered
    assert {pod: converged.out(pod, SNAPSHOT) for pod in converged.pods} == snapshots


def test_junit_has_a_case_per_pod_and_role_and_fails_drift(tampered):
    _, (_, _, xml) = tampered
    cases = {(case.classname, case.name): case for case in xml}
    names = {pod: {name for of, name in cases if of == pod} for pod in tampered[0]}
    assert len(names) == 5 and all(roles == names["pod-1"] for roles in names.values())
    assert {"Container disk", "Scratch", "Shared memory", "Environment"} <= names["pod-1"]
    failed = {
        key for key, case in cases.items() if any(isinstance(r, Failure) for r in case.result)
    }
    assert failed == {("pod-1", "Environment"), ("pod-2", "Environment"), ("pod-4", "Environment")}


def test_small_shm_is_a_violation_and_beats_drift(tampered, converged, tmp_path):
    converged.host_vars("pod-3", None)
    result, document, xml = report(tmp_path, converged)
    assert result.returncode == 1
    pod3 = document["pods"]["pod-3"]
    assert pod3["status"] == "violation"
    assert pod3["violations"][0]["role"] == "Shared memory"
    assert "/dev/shm is 64M, below the minimum 16G" in pod3["violations"][0]["message"]
    assert document["summary"]["drift"] == 3
    failures = [case for case in xml if case.classname == "pod-3" and case.result]
    assert [case.name for case in failures] == ["Shared memory"]


def test_stopped_pod_is_unreachable(tampered, converged, tmp_path):
    container.stop_pod("pod-5")
    result, document, xml = report(tmp_path, converged, "--limit", "pod-5")
    assert result.returncode == 1
    assert document["pods"]["pod-5"]["status"] == "unreachable"
    assert document["pods"]["pod-5"]["error"]
    assert "pod-5" in result.stdout and "unreachable" in result.stdout
    (case,) = list(xml)
    assert isinstance(case.result[0], Error)


def test_limit_is_repeated_not_comma_separated(converged, tmp_path):
    result, document, _ = report(tmp_path, converged, "--limit", "pod-1", "--limit", "pod-2")
    assert sorted(document["pods"]) == ["pod-1", "pod-2"]
    refused = check(converged, "--limit", "pod-1,pod-2")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        "podstate: --limit pod-1,pod-2 matches no pod: a comma is part of a name, as in "
        "pyinfra; repeat --limit for each pod\n"
    )


def test_invalid_state_exits_1_with_one_line(converged):
    converged.host_vars("pod-2", {"shm": {"min_size": "big"}})
    try:
        result = check(converged)
    finally:
        converged.host_vars("pod-2", None)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "host_vars/pod-2.yaml: shm.min_size: 'big' is not a size" in result.stderr
