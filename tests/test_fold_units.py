"""Unit tests of folding (``podstate.run.fold``): how commands become steps, where a segment
ends, each step's time limit, how a segment's output is read back, and the segment's own
shell, run by a real sh against a lock in a temporary directory."""

from __future__ import annotations

import io
import subprocess

import pytest
from pyinfra.api import FunctionCommand, StringCommand
from pyinfra.api.command import FileUploadCommand

from podstate import settings
from podstate.run import fold, lock, markers
from podstate.run.bookkeeping import write_command
from podstate.shell import script


def test_a_change_is_a_step_with_its_own_time_limit():
    shell, ttl, later = fold._step(lock.Change("echo hi", ttl=500))
    assert not later
    assert ttl == 500
    assert subprocess.run(["sh", "-c", shell], capture_output=True, text=True).stdout == "hi\n"
    assert fold._step(lock.Change("true"))[1] == settings.COMMAND_TIMEOUT


def test_a_small_upload_rides_in_its_step_and_a_large_one_or_a_file_or_a_callback_does_not(
    tmp_path,
):
    dest = tmp_path / "uploaded"
    shell, *_ = fold._step(FileUploadCommand(io.BytesIO(b"a\nb\0c"), str(dest)))
    subprocess.run(["sh", "-c", shell], stdin=subprocess.DEVNULL, check=True)
    assert dest.read_bytes() == b"a\nb\0c"
    assert oct(dest.stat().st_mode & 0o777) == "0o600"
    big = FileUploadCommand(io.BytesIO(b"x" * (fold.UPLOAD_MAX + 1)), "/tmp/x")
    assert fold._step(big) is None
    assert fold._step(FileUploadCommand(str(tmp_path), "/tmp/x")) is None
    assert fold._step(FunctionCommand(lambda state, host: True, (), {})) is None
    assert fold._step(StringCommand("echo plain")) is None


def test_a_segments_command_line_does_not_grow_with_its_steps():
    small = fold.Segment("h")
    small.add("echo a", 10)
    large = fold.Segment("h")
    for i in range(500):
        large.add(f"echo {i} " + "b" * 1500, 10)
    assert large.command() == small.command()
    assert len(large.payload()) > 500 * 1500
    assert len(large.command()) < 16_384


def test_a_segments_time_limit_is_its_steps_and_the_wait_for_the_lock():
    segment = fold.Segment("h")
    segment.add("a", 10)
    segment.add("b", 300)
    assert segment.timeout == 10 + 300 + 10 + lock.MARGIN


def read(steps: int, *chunks: bytes) -> list[bytes | tuple[bool, int]]:
    """Return what the fold reads in ``chunks`` (a segment of ``steps`` printed them): each
    marker, as (ok, step), and the output between markers, joined."""
    stream, read = markers.Stream(steps), []
    for piece in (piece for chunk in [*chunks, b""] for piece in stream.feed(chunk)):
        if read and isinstance(piece, bytes) and isinstance(read[-1], bytes):
            read[-1] += piece
        else:
            read.append(piece)
    return read


def test_markers_are_found_wherever_they_fall_among_the_chunks():
    mark = f"\n{fold.MARK} ".encode()
    chunks = [b"lock\n", mark + b"0", b"\nno newline" + mark[:5], mark[5:] + b"ok 0\n" + mark]
    got = read(3, *chunks, b"1\n\xff\r")
    assert got == [b"lock\n", (False, 0), b"no newline", (True, 0), (False, 1), b"\xff\r"]


def test_what_merely_looks_like_a_marker_is_output():
    other = f"\n@@podstate-{'0' * 12} 1\n\n@@podstate- 1\n\n{fold.MARK} 7\n\n{fold.MARK}x 1\n"
    assert read(3, other.encode()) == [other.encode()]


def events(segment: fold.Segment, stdout: bytes) -> list[str]:
    """Return what a segment printed as the fold reads it: each marker ("step N", "ok N") and
    the output between markers, in order."""
    return [
        piece.decode() if isinstance(piece, bytes) else f"{'ok' if piece[0] else 'step'} {piece[1]}"
        for piece in read(len(segment.steps), stdout)
    ]


def test_an_operation_replays_its_steps_then_what_no_segment_held_then_the_rest():
    segment = fold.Segment("h")
    segment.add("a", 1)
    segment.add("b", 1)
    callback = FunctionCommand(lambda state, host: True, (), {})
    later = StringCommand("after the callback")
    replayed = list(fold._replay([(segment, 0), (segment, 1), callback], iter([later])))
    assert [c.function for c in replayed[:3]] == [fold._run, fold._report, fold._report]
    assert [c.args[1:] for c in replayed[1:3]] == [(0,), (1,)]
    assert replayed[3:] == [callback, later]
    upload = FileUploadCommand(str(__file__), "/tmp/x")
    assert [getattr(c, "function", c) for c in fold._replay([upload], iter([]))] == [
        fold._hold,
        upload,
    ]


def run_segment(
    segment: fold.Segment, held: bool = False, payload: bytes | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", "-c", segment.command(held)],
        input=segment.payload() if payload is None else payload,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "LOCK", str(tmp_path / "podstate.lock"))
    return tmp_path / "podstate.lock"


def test_a_segment_marks_each_step_and_stops_at_the_first_that_fails(lock_dir, tmp_path):
    segment = fold.Segment("h")
    segment.add(fold._step(lock.Change("echo first"))[0], 5)
    segment.add(*fold._step(FileUploadCommand(io.BytesIO(b"data"), str(tmp_path / "up"))))
    segment.add(fold._step(lock.Change("echo second >&2; exit 3"))[0], 5)
    segment.add(fold._step(lock.Change("echo never"))[0], 5)
    segment.release = True
    result = run_segment(segment)
    assert result.returncode == 3
    assert events(segment, result.stdout) == [
        "step 0",
        "first\n",
        "ok 0",
        "step 1",
        "ok 1",
        "step 2",
        "second\n",  # stderr, in the one stream
    ]
    assert (tmp_path / "up").read_bytes() == b"data"
    assert not lock_dir.exists()  # a failing step releases the lock


def test_a_segment_that_holds_a_lock_it_lost_runs_no_step(lock_dir):
    segment = fold.Segment("h")
    segment.add(fold._step(lock.Change("echo ran"))[0], 5)
    result = run_segment(segment, held=True)
    assert result.returncode == 75
    assert b"ran" not in result.stdout
    assert b"no longer holds the pod lock" in result.stderr


def test_a_segment_whose_steps_did_not_all_arrive_runs_none(lock_dir, tmp_path):
    segment = fold.Segment("h")
    segment.add(fold._step(lock.Change(f"touch {tmp_path}/ran"))[0], 5)
    segment.add(fold._step(lock.Change("echo second"))[0], 5)
    segment.release = True
    payload = segment.payload()
    cut = payload[: payload.index(b"echo second")]
    result = run_segment(segment, payload=cut)
    assert result.returncode == 75
    assert b"did not all reach the pod" in result.stdout + result.stderr
    assert not (tmp_path / "ran").exists()
    assert not lock_dir.exists()  # released


def test_file_writes_share_one_copy_of_their_script_and_each_writes_its_file(lock_dir, tmp_path):
    segment = fold.Segment("h")
    for name in ("a", "b", "c"):
        write = write_command(str(tmp_path / name), f"{name}'s content\n", True, "640")
        segment.add(fold._step(lock.Change(write))[0], 5)
    segment.release = True
    payload = segment.payload().decode()
    line = next(x for x in script("write_file.sh").splitlines() if len(x) > 40)
    assert payload.count(line) == 1
    result = run_segment(segment)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("a", "b", "c"):
        assert (tmp_path / name).read_text() == f"{name}'s content\n"
        assert oct((tmp_path / name).stat().st_mode & 0o777) == "0o640"
    alone = fold.Segment("h")  # a segment without a file write defines nothing
    alone.add(fold._step(lock.Change("echo hi"))[0], 5)
    assert b"podstate_write_file" not in alone.payload()


def _write(path, content: str, mode: str = "644") -> tuple[str, int, bool]:
    return fold._step(lock.Change(write_command(str(path), content, True, mode), later=True))


def test_writes_are_proved_together_before_the_next_step_that_must_wait_for_them(
    lock_dir, tmp_path
):
    segment = fold.Segment("h")
    for name in ("a", "b"):
        segment.add(*_write(tmp_path / name, f"{name}\n"))
    segment.add(fold._step(lock.Change("echo after"))[0], 5)
    segment.add(*_write(tmp_path / "c", "c\n", "600"))
    segment.release = True
    result = run_segment(segment)
    assert result.returncode == 0, result.stdout + result.stderr
    assert events(segment, result.stdout) == [
        "step 0",
        "step 1",
        "ok 0",  # both proved, before the step that is not a write runs
        "ok 1",
        "step 2",
        "after\n",
        "step 3",
        "ok 2",
        "ok 3",
    ]
    assert oct((tmp_path / "c").stat().st_mode & 0o777) == "0o600"
    assert not lock_dir.exists()
    assert (tmp_path / "podstate.lock.proofs").read_text() == ""  # each proof empties it


@pytest.mark.parametrize("spoil", ["printf other >{a}", "chmod 600 {a}"])
def test_a_write_that_does_not_hold_fails_its_own_step_and_no_step_that_waits_runs(
    lock_dir, tmp_path, spoil
):
    segment = fold.Segment("h")
    segment.add(*_write(tmp_path / "a", "a\n"))
    segment.add(fold._step(lock.Change(spoil.format(a=tmp_path / "a"), later=True))[0], 5, True)
    segment.add(fold._step(lock.Change(f"touch {tmp_path}/never"))[0], 5)
    segment.release = True
    result = run_segment(segment)
    assert result.returncode == 1
    lines = events(segment, result.stdout)
    assert lines[:3] == ["step 0", "step 1", "step 0"]  # the proof's line is step 0's output
    why = "does not hold the content" if "printf" in spoil else "does not have mode 644"
    assert why in lines[3], lines
    assert lines[4:] == ["ok 1"]
    assert not (tmp_path / "never").exists()
    assert not lock_dir.exists()


def test_a_failing_step_still_reports_the_writes_before_it_proved(lock_dir, tmp_path):
    segment = fold.Segment("h")
    segment.add(*_write(tmp_path / "a", "a\n"))
    segment.add(fold._step(lock.Change("exit 4", later=True))[0], 5, True)
    segment.release = True
    result = run_segment(segment)
    assert result.returncode == 4
    assert "ok 0" in events(segment, result.stdout)
    assert (tmp_path / "a").read_text() == "a\n"


def test_a_write_alone_proves_itself(tmp_path):
    result = subprocess.run(
        ["sh", "-c", write_command(str(tmp_path / "a"), "a\n", True, "640")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "a").read_text() == "a\n"


def test_a_file_written_twice_is_proved_as_its_last_write_left_it(lock_dir, tmp_path):
    segment = fold.Segment("h")
    segment.add(*_write(tmp_path / "a", "first\n"))
    segment.add(*_write(tmp_path / "b", "b\n"))
    segment.add(*_write(tmp_path / "a", "second\n", "600"))
    segment.release = True
    result = run_segment(segment)
    assert result.returncode == 0, result.stdout + result.stderr
    assert events(segment, result.stdout)[3:] == ["ok 0", "ok 1", "ok 2"]
    assert (tmp_path / "a").read_text() == "second\n"


def _last(path, content: str) -> tuple[str, int, bool]:
    write = write_command(str(path), content, True, "644", last=True)
    return fold._step(lock.Change(write, later=True))


def test_the_last_write_is_put_in_place_once_it_and_every_write_before_it_hold(lock_dir, tmp_path):
    segment = fold.Segment("h")
    segment.add(*_write(tmp_path / "a", "a\n"))
    segment.add(*_last(tmp_path / "ready", "ready\n"))
    segment.release = True
    result = run_segment(segment)
    assert result.returncode == 0, result.stdout + result.stderr
    assert events(segment, result.stdout)[2:] == ["ok 0", "ok 1"]
    assert (tmp_path / "ready").read_text() == "ready\n"
    assert sorted(p.name for p in tmp_path.iterdir() if "ready" in p.name) == ["ready"]


def test_the_last_write_is_not_put_in_place_when_a_write_before_it_does_not_hold(
    lock_dir, tmp_path
):
    segment = fold.Segment("h")
    segment.add(*_write(tmp_path / "a", "a\n"))
    spoil = f"printf other >{tmp_path / 'a'}"
    segment.add(fold._step(lock.Change(spoil, later=True))[0], 5, True)
    segment.add(*_last(tmp_path / "ready", "ready\n"))
    segment.release = True
    result = run_segment(segment)
    assert result.returncode == 1
    out = events(segment, result.stdout)
    assert "does not hold the content podstate wrote" in "".join(out)
    assert (
        out[out.index("step 2", 3) + 1]
        == f"podstate: {tmp_path / 'ready'}: not written, since a write before it does not hold\n"
    )
    assert "ok 2" not in out and "ok 1" in out
    assert not [p.name for p in tmp_path.iterdir() if "ready" in p.name]  # nor its copy
    alone = subprocess.run(  # outside a fold, a last write is one like any other
        ["sh", "-c", write_command(str(tmp_path / "ready"), "r\n", True, "644", last=True)]
    )
    assert alone.returncode == 0 and (tmp_path / "ready").read_text() == "r\n"
