"""How a fold reads its command's stream and sends its steps (``podstate.run.fold.converse``),
over a real SSH channel to this machine's dash and bash (tests/fold_ssh.py): markers found
wherever they arrive, each step held to its own time limit, a sender that waits for the
window instead of spinning, and a command killed under a step named as such."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from podstate.run import fold, lock
from tests import fold_ssh


@pytest.fixture(params=["dash", "bash"])
def ssh(request, tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "LOCK", str(tmp_path / "podstate.lock"))
    with fold_ssh.connection(request.param) as connection:
        yield connection


def step(shell: str, ttl: int = 5, later: bool = False) -> tuple[str, int, bool]:
    """Return ``shell`` as a fold's step: under the lock, with its time limit."""
    inner, _, _ = fold._step(lock.Change(shell))
    return inner, ttl, later


def run(ssh: fold_ssh.Connection, *steps: tuple[str, int, bool]) -> fold.Segment:
    """Return a segment of ``steps`` (which releases the lock), run to its end."""
    segment = fold.Segment("op", release=True)
    for one in steps:
        segment.add(*one)
    fold.converse(segment, ssh.open(segment.command()), None)
    return segment


def test_a_step_whose_output_has_no_final_newline_is_done(ssh):
    segment = run(ssh, step("printf 'no newline'"), step("printf '10%%\\r100%%'"), step("true"))
    assert segment.done == {0, 1, 2}
    assert fold._as_lines(segment.output[0]) == [("stdout", "no newline")]


def test_a_step_after_output_with_no_newline_is_held_to_its_own_time_limit(ssh):
    """Its marker, glued to that output, used to go unseen: the step ran under the short
    limit of the step before, and was given up on while it still ran under the lock."""
    segment = run(ssh, step("printf x", ttl=1), step("sleep 1.5", ttl=10, later=True))
    assert segment.done == {0, 1}, segment.why


def test_a_step_that_outlives_its_own_limit_is_cut_there_and_named(ssh):
    segment = run(ssh, step("true", ttl=10), step("echo going; sleep 5", ttl=1))
    assert segment.done == {0}
    assert fold._failure(segment, 1) == [
        ("stdout", "going"),
        ("stderr", "podstate: not done within 1 s, while this step ran"),
    ]


def test_a_command_killed_while_a_silent_step_runs_says_so(ssh, tmp_path):
    """What a `pkill -f` of another test suite did to folds on the same machine: the step
    had started, and was reported as one that "did not run"."""
    started = tmp_path / "started"
    killer = threading.Thread(target=_kill_when, args=(started, ssh), daemon=True)
    killer.start()
    segment = run(ssh, step("true"), step(f"touch {started}; sleep 30"))
    killer.join()
    assert segment.done == {0}
    assert fold._failure(segment, 1) == [
        (
            "stderr",
            "podstate: the command ended with no exit status (a signal ended it, or its "
            "connection was lost), while this step ran",
        )
    ]


def _kill_when(path: Path, ssh: fold_ssh.Connection) -> None:
    """SIGTERM the last command's processes (by their group) once ``path`` exists."""
    for _ in range(3000):
        if path.exists():
            os.killpg(ssh.pid(), signal.SIGTERM)
            return
        time.sleep(0.01)


def test_megabytes_of_output_reach_their_step_exactly(ssh, tmp_path):
    data = os.urandom(6 << 20)
    (tmp_path / "data").write_bytes(data)
    segment = run(ssh, step(f"cat {tmp_path}/data"), step("printf after"), step("true"))
    assert segment.done == {0, 1, 2}
    assert bytes(segment.output[0]) == data
    assert bytes(segment.output[1]) == b"after"


class Counted:
    """A real channel whose sends are counted."""

    def __init__(self, channel) -> None:
        self.channel = channel
        self.sends = 0

    def send(self, data) -> int:
        self.sends += 1
        return self.channel.send(data)

    def __getattr__(self, name: str):
        return getattr(self.channel, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.channel.close()


FLOOD = "yes " + "a" * 500 + " | head -c 8000000"  # output, and no read of stdin


def test_the_sender_waits_for_a_full_window_instead_of_trying_again_and_again(ssh):
    """A command that does not read its stdin, with a payload larger than the window: the
    sender blocks until the window drains or the command ends; it never retries on a
    timeout, which, once the deadline had passed, it did each millisecond while output still
    came (here, faster than a slow terminal shows it with -vv)."""
    segment = fold.Segment("op", release=True)
    segment.add(": " + "x" * (3 << 20), 1)  # never run: more than a window (2 MiB)
    channel = Counted(ssh.open(FLOOD))
    fold.converse(segment, channel, lambda line: time.sleep(0.0002))
    assert channel.sends <= len(segment.payload()) // fold.CHUNK + 2
    assert segment.why == "not done within 1 s" and segment.done == set()
