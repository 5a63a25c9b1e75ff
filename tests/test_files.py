"""Managed files on a lived-in filesystem: what the probe sees, and writes that prove
themselves. Both run in a real ``sh`` on a real directory tree."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from podstate.facts.probe import PodProbe
from podstate.limits import MAX_FILE
from podstate.run.bookkeeping import file_problem, write_command
from podstate.run.words import composed_word
from tests import probing

TEXT = "export A=1\n"


def probe(*paths: Path) -> dict:
    out = probing.run(files=[str(p) for p in paths])
    assert out.returncode == 0, out.stderr
    return PodProbe().process(out.stdout.splitlines()).files


def write(path: Path, content: str = TEXT, own: bool = False, mode: str = "644", env=None):
    """Write ``path`` as podstate does; an edit applies to the file as it is now."""
    was = path.read_bytes().decode("utf-8", "surrogateescape") if path.is_file() else None
    command = write_command(str(path), content, own, mode, was)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env)


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob(".*.podstate.*")]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "volume").mkdir()
    (tmp_path / "volume" / "bashrc").write_text("alias ll='ls -l'\n")
    (tmp_path / "link").symlink_to(tmp_path / "volume" / "bashrc")
    (tmp_path / "dangling").symlink_to(tmp_path / "volume" / "gone")
    (tmp_path / "unmounted").symlink_to(tmp_path / "no-volume" / "bashrc")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "private").write_text("export TOKEN=secret\n")
    (tmp_path / "private").chmod(0o600)
    (tmp_path / "big").write_bytes(b"#" * (MAX_FILE + 1))
    (tmp_path / "odd").write_bytes(b"\x1b]0;owned\x07\xff\xfe\n")
    return tmp_path


@pytest.mark.parametrize(
    "name, state, link, problem_edit, problem_own",
    [
        ("link", "file", True, None, "is a symbolic link to /"),
        ("dangling", "dangling", True, "gone, which does not exist", "does not exist"),
        ("loop1", "loop", True, "link loop", "link loop"),
        ("unmounted", "loop", True, "no-volume/bashrc, which does not resolve", "missing"),
        ("dir", "directory", False, "is a directory", "is a directory"),
        ("fifo", "fifo", False, "is a fifo", "is a fifo"),
        ("private", "file", False, None, None),
        ("big", "large", False, "edits files of up to 64K", "edits files of up to 64K"),
        ("absent", "absent", False, None, None),
    ],
)
def test_probe_names_what_is_there(tree, name, state, link, problem_edit, problem_own):
    found = probe(tree / name)[str(tree / name)]
    assert (found.state, found.link) == (state, link)
    for own, expected in ((False, problem_edit), (True, problem_own)):
        problem = file_problem(str(tree / name), found, own)
        assert (problem is None) if expected is None else (expected in problem), problem


def test_probe_reads_bytes_that_are_not_utf8_back_exactly(tree):
    found = probe(tree / "odd")[str(tree / "odd")]
    assert found.content.encode("utf-8", "surrogateescape") == (tree / "odd").read_bytes()
    assert write(tree / "odd", found.content + "more\n").returncode == 0
    assert (tree / "odd").read_bytes() == b"\x1b]0;owned\x07\xff\xfe\nmore\n"


def test_edit_follows_a_link_and_keeps_it(tree):
    result = write(tree / "link")
    assert result.returncode == 0, result.stderr
    assert (tree / "link").is_symlink()
    assert (tree / "volume" / "bashrc").read_text() == TEXT
    assert leftovers(tree) == []


def test_edit_keeps_mode_and_owner(tree):
    os.chown(tree / "private", 1234, 5678)
    assert write(tree / "private").returncode == 0
    info = (tree / "private").stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o600, 1234, 5678)
    assert (tree / "private").read_text() == TEXT


def test_write_makes_missing_directories(tree):
    assert write(tree / "new" / "deeper" / "f", own=True).returncode == 0
    assert (tree / "new" / "deeper" / "f").read_text() == TEXT
    assert leftovers(tree) == []


@pytest.mark.parametrize("mode", ["644", "600", "640", "755", "700", "1644"])
def test_own_file_gets_its_mode(tree, mode):
    """Read and write bits come from the umask the temporary file is made with; any other
    bit from a chmod of it."""
    assert write(tree / "private", own=True, mode=mode).returncode == 0
    assert stat.S_IMODE((tree / "private").stat().st_mode) == int(mode, 8)
    assert (tree / "private").read_text() == TEXT
    assert leftovers(tree) == []


def test_a_failing_write_fails_inside_an_and_list(tree):
    """A caller's && switches set -e off; each step of the write is checked on its own."""
    command = write_command(str(tree / "dir"), TEXT, True, "644")
    result = subprocess.run(["sh", "-c", f"{command} && echo went on"], capture_output=True,
                            text=True)  # fmt: skip
    assert result.returncode == 1 and "went on" not in result.stdout
    assert "not a regular file" in result.stderr
    (tree / "ro").mkdir()
    (tree / "ro").chmod(0o555)
    command = write_command(str(tree / "ro" / "f"), TEXT, True, "644")
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         "sh", "-c", f"{command} && echo went on"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1 and "went on" not in result.stdout, result.stderr
    assert "Permission denied" in result.stderr


@pytest.mark.parametrize(
    "name, own, message",
    [
        ("dir", True, "is a directory, not a regular file"),
        ("dir", False, "is a directory, not a regular file"),
        ("dangling", False, "a file that does not exist"),
        ("unmounted", False, "does not resolve"),
        ("loop1", False, "does not resolve"),
        ("link", True, "is a symbolic link"),
        ("fifo", False, "is a fifo"),
    ],
)
def test_refused_write_fails_with_one_line_and_leaves_nothing(tree, name, own, message):
    before = sorted(p.name for p in tree.rglob("*"))
    result = write(tree / name, own=own)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert sorted(p.name for p in tree.rglob("*")) == before
    assert list((tree / "dir").iterdir()) == []


def test_a_failing_step_fails_the_write(tree):
    (tree / "ro").mkdir()
    (tree / "ro").chmod(0o555)
    result = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            write_command(str(tree / "ro" / "f"), TEXT, True, "644"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "Permission denied" in result.stderr
    assert list((tree / "ro").iterdir()) == []


def test_write_checks_what_it_wrote(tree):
    """The read-back compares with the checksum the control machine computed: a command
    whose content does not match it fails, though every other step succeeded."""
    command = write_command(str(tree / "new"), TEXT, True, "644")
    wrong = command.replace(hashlib.sha256(TEXT.encode()).hexdigest(), "0" * 64)
    result = subprocess.run(["sh", "-c", wrong], capture_output=True, text=True)
    assert result.returncode == 1
    assert "does not hold the content podstate wrote" in result.stderr


RUNPOD_LINE = "source /etc/rp_environment\n"
CHANGED = "changed since podstate read it (another program wrote it); it is left as it is"


def test_an_edit_of_a_file_changed_since_the_probe_is_refused_and_loses_nothing(tree):
    """RunPod's start script appends its line to ~/.bashrc after sshd answers: an edit
    computed from the file before that must not replace it."""
    bashrc = tree / "volume" / "bashrc"
    read = bashrc.read_text()
    with open(bashrc, "a") as f:
        f.write(RUNPOD_LINE)
    for path in (bashrc, tree / "link"):
        result = subprocess.run(
            ["sh", "-c", write_command(str(path), TEXT, False, "644", read)],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and CHANGED in result.stderr, result.stderr
        assert bashrc.read_text() == read + RUNPOD_LINE
        assert leftovers(tree) == []


def test_an_edit_of_a_file_created_since_the_probe_is_refused(tree):
    (tree / "new").write_text(RUNPOD_LINE)
    command = write_command(str(tree / "new"), TEXT, False, "644", None)
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert result.returncode == 1 and CHANGED in result.stderr, result.stderr
    assert (tree / "new").read_text() == RUNPOD_LINE
    assert leftovers(tree) == []


def test_an_edit_of_a_missing_file_creates_it(tree):
    result = write(tree / "new")
    assert result.returncode == 0, result.stderr
    assert (tree / "new").read_text() == TEXT
    assert leftovers(tree) == []


def test_an_append_during_the_rename_is_put_back(tree):
    """A line appended to the old file after the check and before the rename (here by an
    ``mv`` that appends first, as the start script's ``>>`` can) is not lost: the old file
    is put back and the edit refused."""
    bashrc = tree / "volume" / "bashrc"
    before = bashrc.read_text()
    bin_dir = tree / "bin"
    bin_dir.mkdir()
    mv = bin_dir / "mv"
    mv.write_text(
        "#!/bin/sh\n"
        f"if [ ! -e {tree}/appended ]; then : >{tree}/appended; echo 'source /etc/rp_environment'"
        ' >>"$4"; fi\n'
        f'exec {shutil.which("mv")} "$@"\n'
    )
    mv.chmod(0o755)
    result = write(bashrc, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert (tree / "appended").exists()
    assert result.returncode == 1 and CHANGED in result.stderr, result.stderr
    assert bashrc.read_text() == before + RUNPOD_LINE
    assert leftovers(tree) == []


def test_an_edit_with_an_owner_gives_the_file_that_mode_and_owner(tree):
    path = tree / "private"
    was = path.read_text()
    command = write_command(str(path), "#!/bin/sh\n", False, "4755", was, owner="1234:5678")
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    info = path.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o4755, 1234, 5678)
    assert path.read_text() == "#!/bin/sh\n" and leftovers(tree) == []


def _composed(tmp_path: Path, sources: dict[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """Write ``sources`` (name -> content) under ``tmp_path``; return a content that ends with
    all of them, in order, and one line, and the (path, content) pairs it copies."""
    copied = []
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
        copied.append((str(tmp_path / name), text))
    head = "podstate-boot 1\ntext 2 644 /a\nguarded-text 1 644 /b\nQUJD\ncontents 3\n"
    return head + "".join(sources.values()) + "sum 0123\n", copied


def test_a_content_ending_with_files_on_the_pod_is_copied_from_them(tmp_path):
    """The boot hook's data ends with files the same apply writes: its write puts them
    together on the pod (one cat) instead of sending them again, and proves the result."""
    content, copied = _composed(tmp_path, {"a": "one\n  two \\n\n", "b": "héllo\n"})
    word = composed_word(content, copied)
    assert word is not None and "one" not in word and "héllo" not in word
    target = tmp_path / "state"
    command = write_command(str(target), content, True, "600", copied=copied)
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert target.read_text() == content and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_copied_file_that_changed_fails_the_write_and_leaves_the_old_one(tmp_path):
    content, copied = _composed(tmp_path, {"a": "one\n", "b": "two\n"})
    target = tmp_path / "state"
    target.write_text("old\n")
    (tmp_path / "b").write_text("changed since\n")
    command = write_command(str(target), content, True, "600", copied=copied)
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert result.returncode == 1 and "a file it copies on the pod changed" in result.stderr
    assert target.read_text() == "old\n" and leftovers(tmp_path) == []
    (tmp_path / "b").unlink()
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert result.returncode == 1 and "cannot be put together" in result.stderr
    assert result.stderr.count("\n") <= 2, result.stderr
    assert target.read_text() == "old\n" and leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "content, copied",
    [
        ("head\nA\nsum\n", []),  # nothing to copy
        ("head\nA\nsum\nmore\n", [("/a", "A\n")]),  # more than one line after them
        ("head\nA\nsum", [("/a", "A\n")]),  # no final newline
        ("head\nB\nsum\n", [("/a", "A\n")]),  # not there
        ("head\nA\nsum\n", [("/a\nb", "A\n")]),  # a path a line cannot hold
        ("h\0ead\nA\nsum\n", [("/a", "A\n")]),  # a head a shell word cannot hold
    ],
)
def test_a_content_that_does_not_end_with_the_files_is_sent_whole(content, copied):
    assert composed_word(content, copied) is None
    assert "+" not in write_command("/x", content, True, "644", copied=copied).split("\n")[0]
