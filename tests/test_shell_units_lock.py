"""scripts/lock.sh function by function, under dash, bash and busybox sh: its functions are
sourced without its last line (``lock_main "$@"``), the lock's globals set as lock_main
sets them, and each called against a lock directory in a temporary directory.
(tests/test_lock.py runs the whole script, under contention.)
"""

from __future__ import annotations

import fcntl
import subprocess
import time
from pathlib import Path

import pytest

from podstate.shell import script
from tests.shell_probe import SHELLS

MAIN = 'lock_main "$@"\n'


def functions() -> str:
    """Return lock.sh as it is sent, without its last line, which runs it."""
    text = script("lock.sh")
    assert text.endswith(MAIN)
    return text[: -len(MAIN)]


def call(shell: str, lock: Path, program: str) -> subprocess.CompletedProcess[str]:
    """Return what ``program`` did after lock.sh's functions, with LOCK ``lock``, TOKEN
    "mine" and the settings lock_main would set (a TTL of 60 s, no wait, no SEEN)."""
    setup = (
        f"L={lock} mutex_file={lock}.mutex token=mine owner='me' boot='' mine=0 took= "
        "ttl=60 wait=1 grace=3 seen= end=keep"
    )
    return subprocess.run(
        [*SHELLS[shell], "-c", f"{functions()}\n{setup}\n{program}"],
        capture_output=True,
        text=True,
        timeout=30,
    )


def held(lock: Path, token: str, expires: int) -> None:
    """Make ``lock`` held by ``token`` until ``expires`` (seconds since the epoch)."""
    lock.mkdir()
    (lock / "token").write_text(f"{token}\n")
    (lock / "owner").write_text(f"owner {token}\n")
    (lock / "expires").write_text(f"{expires}\n")


def test_try_take_takes_a_free_lock_and_counts_the_take(shell: str, tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    done = call(shell, lock, "try_take; echo $?")
    assert done.stdout == "0\n"
    assert (lock / "token").read_text() == "mine\n"
    assert (tmp_path / "lock.gen").read_text() == "1\n"
    assert abs(int((lock / "expires").read_text()) - (time.time() + 60)) < 5


@pytest.mark.parametrize(
    ("token", "expires_in", "status"),
    [
        ("mine", 30, "3"),  # this run's already: renewed
        ("other", 30, "2"),  # another run's, live
        ("other", -5, "0"),  # another run's, expired: taken over
    ],
)
def test_try_take_answers_whose_the_lock_is(
    shell: str, tmp_path: Path, token: str, expires_in: int, status: str
) -> None:
    lock = tmp_path / "lock"
    held(lock, token, int(time.time()) + expires_in)
    assert call(shell, lock, "try_take; echo $?").stdout == f"{status}\n"
    assert (lock / "token").read_text() == ("other\n" if status == "2" else "mine\n")


def test_try_take_changes_nothing_when_another_run_took_the_lock_since_seen(
    shell: str, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"
    (tmp_path / "lock.gen").write_text("4\n")
    assert call(shell, lock, "seen=3; try_take; echo $?").stdout == "4\n"
    assert not lock.exists()
    assert call(shell, lock, "seen=4; try_take; echo $?").stdout == "0\n"
    assert (tmp_path / "lock.gen").read_text() == "5\n"


def test_readlock_takes_a_lock_never_given_an_expiry_for_60_s_after_it_was_made(
    shell: str, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"
    lock.mkdir()
    made = int(lock.stat().st_mtime)
    done = call(shell, lock, 'readlock; echo "[$holder] $expires"')
    assert done.stdout == f"[] {made + 60}\n"


@pytest.mark.parametrize(("token", "status", "kept"), [("mine", "0", False), ("other", "0", True)])
def test_release_ours_removes_only_this_runs_lock(
    shell: str, tmp_path: Path, token: str, status: str, kept: bool
) -> None:
    lock = tmp_path / "lock"
    held(lock, token, int(time.time()) + 30)
    assert call(shell, lock, "mutex 5 release_ours; echo $?").stdout == f"{status}\n"
    assert lock.exists() == kept


@pytest.mark.parametrize(("token", "status"), [("mine", "0"), ("other", "1")])
def test_renew_ours_extends_only_this_runs_lock(
    shell: str, tmp_path: Path, token: str, status: str
) -> None:
    lock = tmp_path / "lock"
    soon = int(time.time()) + 2
    held(lock, token, soon)
    assert call(shell, lock, "renew_ours 100; echo $?").stdout == f"{status}\n"
    expires = int((lock / "expires").read_text())
    assert (expires > soon + 90) == (token == "mine")


def test_extend_never_shortens_the_lock(shell: str, tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    later = int(time.time()) + 1000
    held(lock, "mine", later)
    call(shell, lock, "readlock; extend 10")
    assert (lock / "expires").read_text() == f"{later}\n"


def test_settle_ours_leaves_this_runs_lock_valid_for_exactly_the_grace(
    shell: str, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"
    held(lock, "mine", int(time.time()) + 1000)
    call(shell, lock, "settle_ours 3")
    assert abs(int((lock / "expires").read_text()) - (time.time() + 3)) < 3


def test_mutex_answers_76_when_another_holds_it_past_the_wait(shell: str, tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    mutex = tmp_path / "lock.mutex"
    with mutex.open("a") as held_here:
        fcntl.flock(held_here, fcntl.LOCK_EX)
        assert call(shell, lock, "mutex 1 true; echo $?").stdout == "76\n"
    assert call(shell, lock, "mutex 1 false; echo $?").stdout == "1\n"  # the function's own


def test_renew_stops_the_run_when_the_lock_is_another_runs(shell: str, tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    held(lock, "other", int(time.time()) + 30)
    done = call(shell, lock, "renew 60; echo not here")
    assert (done.returncode, done.stdout) == (75, "")
    assert "no longer holds the pod lock (owner other does)" in done.stderr


def test_renew_starts_nothing_while_this_runs_last_renewal_holds(
    shell: str, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"  # not there: any read of it would find it lost
    done = call(shell, lock, f"mine={int(time.time()) + 600}; renew 60; echo $?")
    assert (done.stdout, done.stderr) == ("0\n", "")


@pytest.mark.parametrize(
    ("where", "why"),
    [("missing/lock", "missing does not exist"), ("lock", None)],
)
def test_usable_says_why_a_lock_path_cannot_be_used(
    shell: str, tmp_path: Path, where: str, why: str | None
) -> None:
    lock = tmp_path / where
    done = call(shell, lock, "usable; echo $?")
    assert done.stdout == ("1\n" if why else "0\n")
    if why:
        assert done.stderr.strip().endswith(why)


def test_clock_reads_the_epoch_without_a_program_once_the_boots_time_is_kept(
    shell: str, tmp_path: Path
) -> None:
    lock = tmp_path / "lock"
    done = call(shell, lock, 'clock; echo "$now"; boot=; clock; echo "$now"')
    first, second = map(int, done.stdout.split())
    assert abs(first - time.time()) < 5 and abs(second - first) < 2
    if shell != "bash":  # bash reads $EPOCHSECONDS, and keeps no boot time
        boot_id, *_ = (tmp_path / "lock.clock").read_text().split()
        assert boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
