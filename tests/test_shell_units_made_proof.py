"""The proof of what podstate wrote (scripts/made_proof.sh), each function run alone under
dash, bash and busybox sh on fixture files in a temporary directory: no pod.

tests/test_removal_proof.py holds made_proof's whole table of cases under sh; these hold each
function it is made of, in every shell a pod may have.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from podstate.operations.venv import snapshot_line
from tests.shell_change import Ran, sourced

HEX = "0123456789abcdef" * 4


def proof(shell: str, text: str) -> Ran:
    """Return what ``text`` did after made_proof.sh was sourced as a pod gets it."""
    return sourced(shell, ["made_proof.sh"], text)


def status(shell: str, call: str) -> int:
    """Return the status ``call`` returned."""
    return int(proof(shell, f"{call}; echo $?").out)


def host_keys(*names: str) -> bytes:
    """Return a tar of files ``names``, as podstate archives the host keys."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 6
            tar.addfile(info, io.BytesIO(b"-----\n"))
    return out.getvalue()


def test_made_hex_wants_lowercase_hex_of_the_length_given(shell: str) -> None:
    assert status(shell, "made_hex 0a1b 4") == 0
    refused = ("0A1B", "0a1", "0a1bc", "xyz0", "''")
    assert [status(shell, f"made_hex {word} 4") for word in refused] == [1, 1, 1, 1, 1]


def test_made_first_reads_a_files_first_line(shell: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("first\nsecond\n")
    (tmp_path / "last").write_text("no newline")
    (tmp_path / "empty").write_text("")
    read = 'made_first "$f"; echo "$? $made_head"'
    lines = [proof(shell, f"f={tmp_path}/{n}; {read}").out for n in ("f", "last", "empty", "gone")]
    assert lines == ["0 first\n", "0 no newline\n", "1 \n", "0 \n"]


def test_made_keys_proves_the_archive_and_its_sum_each_where_it_is(
    shell: str, tmp_path: Path
) -> None:
    assert status(shell, f"made_keys {tmp_path}") == 0  # neither is there
    (tmp_path / "hostkeys.tar").write_bytes(host_keys("ssh_host_ed25519_key"))
    (tmp_path / "hostkeys.sum").write_text(f"{HEX}  -\n")
    assert status(shell, f"made_keys {tmp_path}") == 0
    (tmp_path / "hostkeys.sum").write_text("mine\n")
    assert status(shell, f"made_keys {tmp_path}") == 1
    (tmp_path / "hostkeys.sum").unlink()
    (tmp_path / "hostkeys.tar").write_bytes(host_keys("root/notes.txt"))
    assert status(shell, f"made_keys {tmp_path}") == 1


@pytest.mark.parametrize(
    ("line", "proved"),
    [
        (snapshot_line(HEX, "venv-0123456789ab.tar.zst", "zstd", HEX), 0),
        (snapshot_line(HEX, "venv-0123456789ab.tar.gz", "gzip", HEX), 0),
        (snapshot_line(HEX, "venv-0123456789ab.tar.gz", "zstd", HEX), 1),
        (snapshot_line(HEX, "venv-0123456789a.tar.zst", "zstd", HEX), 1),
        (snapshot_line(HEX[:-1], "venv-0123456789ab.tar.zst", "zstd", HEX), 1),
        (f"{HEX} venv-0123456789ab.tar.zst zstd", 1),
        ("*", 1),
    ],
)
def test_made_current_wants_podstates_line_naming_an_archive(
    shell: str, tmp_path: Path, line: str, proved: int
) -> None:
    (tmp_path / "current").write_text(line + "\n")
    assert status(shell, f"made_current {tmp_path}/current") == proved


def test_made_proof_reads_each_kinds_marks(shell: str, tmp_path: Path) -> None:
    (tmp_path / "env.sh").write_text("# Managed by podstate: secrets\n")
    (tmp_path / "theirs.sh").write_text("export A=1\n")
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "state").write_text("podstate-boot 1\n")
    (tmp_path / "boot" / "status").write_text("start now\n")
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "venv-0123456789ab.tar.zst").write_text("")
    (tmp_path / "scratch" / ".podstate-cache" / "uv").mkdir(parents=True)
    (tmp_path / "scratch" / ".podstate-cache" / ".mine").write_text("")
    calls = [
        f"made_proof secrets {tmp_path}/env.sh",
        f"made_proof secrets {tmp_path}/theirs.sh",
        f"made_proof secrets {tmp_path}/gone",
        f"made_proof data {tmp_path}/boot",
        f"made_proof snapshot {tmp_path}/snap",
        f"made_proof dir {tmp_path}/scratch scratch",
        f"made_proof dir {tmp_path}/scratch",
        f"made_proof other {tmp_path}/env.sh",
    ]
    assert [status(shell, call) for call in calls] == [0, 1, 0, 0, 1, 1, 0, 1]


def test_made_proof_prints_nothing(shell: str, tmp_path: Path) -> None:
    (tmp_path / "env.sh").write_text("mine\n")
    assert proof(shell, f"made_proof secrets {tmp_path}/env.sh") == Ran(1, "", "")
