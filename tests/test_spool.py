"""The probe's spool (podstate.facts.spool): every value sent once, each part framed by
itself, put back in its line as the base64 each section's parser reads."""

from __future__ import annotations

import base64
import io
import tarfile

import pytest

from podstate.facts.spool import resolve


def _tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _spool(values: list[bytes], files: str, environ: bytes, archive: bytes) -> str:
    data = b"".join(value + b"\0" for value in values) + environ + b"\0" + archive
    return "spool.data " + base64.b64encode(data).decode()


MARK = b"/proc/self/environ\0PODSTATE_SPOOL=1\0"  # grep's own entry: its read worked


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_each_word_is_its_value_in_base64():
    lines = [
        "mounts @1",
        "file L2E= file 0 =/a 644 0:0 3 @2",
        "file L2I= file 0 =/b 644 0:0 3 @3",
        "proc 7 @4 environ",
        "proc 8 =sh environ",
        "lock.owner run @1",
        "spool 4",
        "spool.files 2 3",
        _spool(
            [b"proc /\n", b"/a", b"/b", b"my job"],
            "2 3",
            MARK + b"/proc/7/environ\0TMPDIR=/t\0/proc/7/environ\0UV_LINK_MODE=copy\0",
            _tar({"/a": b"a\0\n"}),
        ),
    ]
    assert resolve(lines) == [
        f"mounts {_b64(b'proc /' + bytes([10]))}",
        f"file L2E= file 0 =/a 644 0:0 3 {_b64(b'a' + bytes([0, 10]))}",
        "file L2I= unreadable 0 =/b 644 0:0 3",  # tar could not read it: no member
        f"proc 7 {_b64(b'my job')} {_b64(b'TMPDIR=/t' + bytes([10]) + b'UV_LINK_MODE=copy')}",
        "lock.owner run @1",  # the pod's own text
    ]


def test_a_file_that_changed_under_tar_is_the_one_read_again():
    lines = [
        "file L2E= file 0 =/a 644 0:0 3 @1",
        "spool 1",
        "spool.files 1",
        _spool([b"/a"], "1", b"", _tar({"/a": b"ab\0"})),
        "spool.changed",
        f"spool.file 1 {_b64(b'ab')}",
    ]
    assert resolve(lines) == [f"file L2E= file 0 =/a 644 0:0 3 {_b64(b'ab')}"]


def test_lines_without_a_spool_are_as_they_came():
    assert resolve(["caps 0", "user =root"]) == ["caps 0", "user =root"]


def test_environments_a_grep_could_not_read_fail_the_probe():
    # A grep without -z -Z sends no entry, not even its own: the processes would all read as
    # setting none of the variables, so the probe fails instead of reporting them fine.
    lines = ["proc 7 =job environ", "spool 0", "spool.files", _spool([], "", b"", b"")]
    with pytest.raises(ValueError, match="grep could not read"):
        resolve(lines)
    lines[-1] = _spool([], "", MARK, b"")
    assert resolve(lines) == []  # read, and job sets none of them
