"""The fold protocol (``podstate.run.fold``) on generated input: for any steps and any output
(no final newline, ``\\r`` progress bars, NUL and bytes that are not UTF-8, lines that look
like a marker without this run's token or with another, hundreds of KiB), each step's result,
output and time limit are reported exactly, and a payload cut anywhere runs nothing.

The steps run in this machine's dash and bash, over a real SSH channel (tests/fold_ssh.py),
read by the fold's own ``converse``; the markers' parser is also checked alone, on every way
the stream can be cut into chunks.
"""

from __future__ import annotations

import base64
import itertools
import random
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podstate.run import fold, lock, markers
from tests import fold_ssh

SHELLS = ("dash", "bash")
MARK = fold.MARK.encode()
OTHER_TOKEN = MARK.translate(bytes.maketrans(b"0123456789abcdef", b"123456789abcdef0"))
LOOKALIKES = [
    b"\n" + OTHER_TOKEN + b" 0\n",  # another run's marker
    b"\n@@podstate- 1\n",  # no token
    b"\n" + MARK + b"x 0\n",  # this run's token, and more
    b"\n" + MARK + b" ok\n",  # no step
    b"\n" + MARK[:9],  # a marker's start, cut (then, maybe, a real marker)
    b"@@podstate-",
]
SMALL = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"", b"\n", b"\r", b"\0", b"\xff\xfe\xc3", b"10%\r50%\r100%", *LOOKALIKES]),
)
LARGE = st.integers(1, 300_000).map(lambda n: random.Random(n).randbytes(n))
SMALL_OUTPUT = st.lists(SMALL, max_size=4).map(b"".join)
OUTPUT = st.lists(st.one_of(SMALL, LARGE), max_size=4).map(b"".join)
FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _marker(ok: bool, step: int) -> bytes:
    """Return a marker as the fold's shell prints it (``step``, scripts/fold_proof.sh)."""
    return b"\n" + MARK + (b" ok " if ok else b" ") + str(step).encode() + b"\n"


@given(
    st.lists(st.one_of(SMALL_OUTPUT, st.tuples(st.booleans(), st.integers(0, 11))), max_size=8),
    st.lists(st.integers(0, 1 << 20), max_size=6),
)
@settings(max_examples=300, deadline=None)
def test_the_stream_reads_back_as_printed_however_it_is_cut_into_chunks(events, cuts):
    wire = b"".join(e if isinstance(e, bytes) else _marker(*e) for e in events)
    expected: list = []
    for event in events:
        if isinstance(event, bytes) and expected and isinstance(expected[-1], bytes):
            expected[-1] += event
        elif event != b"":
            expected.append(event)
    stream, got = markers.Stream(12), []
    bounds = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    for start, end in [*itertools.pairwise(bounds), (len(wire), len(wire))]:
        for piece in stream.feed(wire[start:end]):  # the last: b"", the stream's end
            if got and isinstance(piece, bytes) and isinstance(got[-1], bytes):
                got[-1] += piece
            else:
                got.append(piece)
    assert [p for p in got if p != b""] == expected


@pytest.fixture(scope="module")
def connections():
    with fold_ssh.connection("dash") as dash, fold_ssh.connection("bash") as bash:
        yield {"dash": dash, "bash": bash}


@pytest.fixture
def fresh_lock(tmp_path, monkeypatch):
    """Return a function that gives each segment a lock of its own (a segment cut short
    leaves its lock behind, which the next would wait for)."""
    count = itertools.count()

    def fresh() -> None:
        monkeypatch.setattr(lock, "LOCK", str(tmp_path / f"lock{next(count)}"))

    return fresh


def _printing(output: bytes, then: str = "") -> str:
    """Return a step's shell that prints ``output`` exactly, then runs ``then``."""
    shell = f"printf %s {base64.b64encode(output).decode()} | base64 -d"
    inner, _, _ = fold._step(lock.Change(f"{shell}\n{then}" if then else shell))
    return inner


STEP = st.tuples(OUTPUT, st.sampled_from([0] * 6 + [1, 3, 75, 126, 255]), st.booleans())


@given(st.sampled_from(SHELLS), st.lists(STEP, min_size=1, max_size=4))
@FAST
def test_each_step_is_reported_as_it_ran_with_its_output_exactly(
    connections, fresh_lock, shell, steps
):
    """A step that fails ends the segment: the steps before it are done, it is reported with
    the command's exit status (its own), and none after it starts."""
    fresh_lock()
    segment = fold.Segment("op", release=True)
    for output, status, later in steps:
        segment.add(_printing(output, f"exit {status}"), 30, later)
    fold.converse(segment, connections[shell].open(segment.command()), None)
    failed = next((i for i, (_, status, _) in enumerate(steps) if status), len(steps))
    assert segment.why == ""
    assert segment.done == set(range(failed))
    assert set(segment.output) == set(range(min(failed + 1, len(steps))))
    for i in segment.output:
        assert bytes(segment.output[i]) == steps[i][0], i
    assert segment.status == (steps[failed][1] if failed < len(steps) else 0)
    if failed < len(steps):
        output, status, _ = steps[failed]
        said = f"podstate: the command ended with exit status {status}, while this step ran"
        assert fold._failure(segment, failed) == (
            fold._as_lines(output) if output else [("stderr", said)]
        )


@given(
    st.sampled_from(SHELLS),
    st.lists(
        st.tuples(st.sampled_from([1, 4]), st.booleans(), SMALL_OUTPUT), min_size=1, max_size=3
    ),
)
@settings(FAST, max_examples=8)
def test_each_step_is_held_to_its_own_time_limit_from_its_own_marker(
    connections, fresh_lock, shell, steps
):
    """A step that sleeps past its own limit (1 s) is given up on, named as the one that ran;
    one that sleeps as long under a longer limit (4 s) is done, whatever limit the step
    before it had and whatever that step printed last."""
    fresh_lock()
    segment = fold.Segment("op", release=True)
    for ttl, sleeps, output in steps:
        segment.add(_printing(output, "sleep 1.5" if sleeps else ""), ttl)
    fold.converse(segment, connections[shell].open(segment.command()), None)
    cut = next((i for i, (ttl, sleeps, _) in enumerate(steps) if sleeps and ttl == 1), None)
    if cut is None:
        assert (segment.why, segment.done, segment.status) == ("", set(range(len(steps))), 0)
    else:
        assert segment.why == "not done within 1 s"
        assert segment.done == set(range(cut)) and set(segment.output) == set(range(cut + 1))
        assert fold._failure(segment, cut)[-1] == (
            "stderr",
            "podstate: not done within 1 s, while this step ran",
        )


@given(st.sampled_from(SHELLS), st.lists(OUTPUT, min_size=1, max_size=3), st.integers(0))
@FAST
def test_a_payload_cut_anywhere_runs_nothing(tmp_path, fresh_lock, shell, outputs, at):
    """Cut anywhere but after its last newline (all of it there: then it runs)."""
    fresh_lock()
    ran = tmp_path / "ran"
    ran.unlink(missing_ok=True)
    segment = fold.Segment("op", release=True)
    for output in outputs:
        segment.add(_printing(output, f"echo >>{ran}"), 5)
    payload = segment.payload()
    result = subprocess.run(
        [shell, "-c", segment.command()],
        input=payload[: at % (len(payload) - 1)],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 75
    assert result.stdout == b"podstate: the changes did not all reach the pod; none was made\n"
    assert not ran.exists()
    assert not Path(lock.LOCK).exists()  # released
