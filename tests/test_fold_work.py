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


def _programs(run, expected: int, commands: int, tried: list) -> list[str] | None:
    """Return the names of the programs ``run()`` started on POD; None, with its output
    added to ``tried``, unless it exited with ``expected`` after ``commands`` remote commands
    (a login shell each). Under strace, the probe now and then brings no answer and is read
    again, or fails (never without it: a check of the same pod just before passes), which
    makes the difference of two runs meaningless."""
    with inside.programs_started(POD) as started:
        result = run()
    names = [path.rsplit("/", 1)[-1] for path in started]
    if result.returncode == expected and names.count("bash") == commands:
        return names
    tried.append(f"exit {result.returncode}: {(result.stdout + result.stderr)[-2000:]}")
    return None


@pytest.fixture(scope="module")
def folds(fleet: Fleet) -> dict[int, Counter[str]]:
    """The programs of each shape's fold: the apply that rewrites that many files, less a
    check of the pod with the same desired state (both tried again, with the files changed
    again, when either was not measured: ``_programs``); and, as ``renewals``, the most
    renewals of the pod lock its time allowed (one each RENEWAL seconds, under strace)."""
    fleet.host_vars(POD, {"files": _files({})})
    result = apply(fleet, "--limit", POD)
    assert result.returncode == 0, result.stdout + result.stderr
    found = {}
    for n in SHAPES:
        tried: list[str] = []
        for attempt in range(4):
            fleet.host_vars(POD, {"files": _files(dict.fromkeys(range(n), f"b{n}.{attempt}"))})
            probe = _programs(lambda: check(fleet, "--limit", POD), 2, 1, tried)
            start = time.monotonic()
            applied = _programs(lambda: apply(fleet, "--limit", POD), 0, 2, tried)
            if probe is not None and applied is not None:
                break
        assert probe is not None and applied is not None, tried
        found[n] = Counter(applied) - Counter(probe)
        found[n]["renewals"] = int((time.monotonic() - start) // RENEWAL)
        print(f"fold writing {n} file(s): {found[n].total()} programs: {dict(found[n])}")
    return found


def test_the_files_are_written(fleet: Fleet, folds):
    text = fleet.out(POD, "cat /root/fold-work/f000.conf /root/fold-work/f199.conf")
    assert text.count("value = b200.") == 2, text


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
