"""End to end: the programs a reconfigure's fold starts on a pod, by how many files it writes.

Counted with strace on the pod's sshd (``inside.programs_started``), as bench/fleet/podwork.py
counts them: the fold is the apply less a check of the same pod (both start with the same
probe). A reconfigure that rewrites managed files writes them, podstate's records of what it
made, and the ready marker and the applied record; whatever their number, the fold decodes
none of them, proves them all in one pass (the marker is put in place after it), and reads
the lock's clock without a program.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from podstate.sandbox import inside
from tests.e2e import Fleet, apply, check

SANDBOX = {"pods": 1}
POD = "pod-1"
FILES = 200
SHAPES = (1, 20, 200)
RECONFIGURE_PROGRAMS = 15  # the fold of a reconfigure that rewrites one file
PER_FILE = 1  # at most one program more for each further file it writes
# A fold renews the pod lock (a flock) once each 10 s at most: on time, not on files
# (scripts/lock.sh: renew), and a fold of 200 files under strace can take that long.
RENEWAL = 10


def _files(version: dict[int, str]) -> dict[str, dict[str, str]]:
    return {
        f"/root/fold-work/f{i:03}.conf": {"content": f"value = {version.get(i, 'a')}\n"}
        for i in range(FILES)
    }


def _programs(fleet: Fleet, run) -> list[str]:
    """Return the names of the programs ``run()`` started on POD, after asserting that it
    exited with 0."""
    with inside.programs_started(POD) as started:
        result = run()
    assert result.returncode == 0, result.stdout + result.stderr
    return [path.rsplit("/", 1)[-1] for path in started]


@pytest.fixture(scope="module")
def folds(fleet: Fleet) -> dict[int, Counter[str]]:
    """The programs of each shape's fold: the apply that rewrites that many files, less a
    check of the pod with the same desired state; and, as ``renewals``, the most renewals of
    the pod lock its time allowed (one each RENEWAL seconds, under strace)."""
    fleet.host_vars(POD, {"files": _files({})})
    result = apply(fleet, "--limit", POD)
    assert result.returncode == 0, result.stdout + result.stderr
    found = {}
    for n in SHAPES:
        fleet.host_vars(POD, {"files": _files(dict.fromkeys(range(n), f"b{n}"))})
        probe = Counter(_programs(fleet, lambda: _expect(check(fleet, "--limit", POD), 2)))
        start = time.monotonic()
        applied = Counter(_programs(fleet, lambda: apply(fleet, "--limit", POD)))
        found[n] = applied - probe
        found[n]["renewals"] = int((time.monotonic() - start) // RENEWAL)
        print(f"fold writing {n} file(s): {found[n].total()} programs: {dict(found[n])}")
    return found


class _Exit:
    """A finished command whose expected exit status reads as 0."""

    def __init__(self, result, expected: int) -> None:
        self.returncode = 0 if result.returncode == expected else result.returncode
        self.stdout, self.stderr = result.stdout, result.stderr


def _expect(result, expected: int) -> _Exit:
    return _Exit(result, expected)


def test_the_files_are_written(fleet: Fleet, folds):
    text = fleet.out(POD, "cat /root/fold-work/f000.conf /root/fold-work/f199.conf")
    assert text == "value = b200\nvalue = b200\n"


def _started(programs: Counter[str]) -> int:
    """Return the programs started, less the pod lock's renewals the fold's time allowed."""
    renewed = min(programs["renewals"], max(programs["flock"] - 1, 0))
    return programs.total() - programs["renewals"] - renewed


def test_a_reconfigures_fold_starts_few_programs(folds):
    assert _started(folds[1]) <= RECONFIGURE_PROGRAMS, folds[1]


@pytest.mark.parametrize("n", SHAPES[1:])
def test_each_further_file_costs_at_most_one_program(folds, n):
    assert _started(folds[n]) - _started(folds[1]) <= PER_FILE * (n - 1), (folds[1], folds[n])
    assert folds[n]["flock"] <= 1 + folds[n]["renewals"], folds[n]  # the take: no release


def test_the_fold_decodes_nothing_and_proves_its_writes_in_one_pass_whatever_their_number(
    folds,
):
    """One pass, a sha256sum and a stat, for every write; the ready marker is put in place
    after it (scripts/fold_proof.sh)."""
    for n in SHAPES:
        assert folds[n]["base64"] == 0, folds[n]
        assert folds[n]["sha256sum"] == folds[n]["stat"] == 1, folds[n]
        assert folds[n]["date"] == 0, folds[n]
