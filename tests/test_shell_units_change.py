"""The probe-side readers of what podstate changed (scripts/made_others.sh, file_state.sh,
secrets_state.sh, venv_missing.sh), each function run alone under dash, bash and busybox sh
on fixture files in a temporary directory: no pod.

Each script is sourced as the probe sources it (podstate.shell.script: without comments),
beside scripts/enc.sh where it needs enc, enc_file or b64.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
import tarfile
from pathlib import Path

import pytest

from podstate.shell import script
from tests.shell_change import Ran, run


def call(shell: str, scripts: list[str], text: str, stdin: Path | None = None) -> Ran:
    """Return what ``text`` did after ``scripts`` were sourced as the probe sends them,
    with ``stdin`` (a file) on the shell's standard input."""
    program = "".join(script(name) for name in scripts) + text
    if stdin is not None:
        program = f"{{\n{program}\n}} <{stdin}"
    return run(shell, program)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- made_others ------------------------------------------------------------------------------


def test_made_others_names_this_pods_paths_another_record_names(shell: str, tmp_path: Path) -> None:
    (tmp_path / "mine").write_text("podstate-made 1\npod mine\nfile =/a 0644\nfile =/b 0644\n")
    (tmp_path / "mine.part").write_text("file =/a 0644\n")
    (tmp_path / "other").write_text("podstate-made 1\npod =/a\nfile =/a 0644\ndir =/c -\n")
    done = call(shell, ["made_others.sh"], f"made_mine=' =/a =/b'; made_others {tmp_path} mine")
    assert (done.code, done.out) == (0, "made.other =/a\n")


def test_made_others_with_nothing_made_reads_no_record(shell: str, tmp_path: Path) -> None:
    (tmp_path / "other").write_text("file =/a 0644\n")
    done = call(shell, ["made_others.sh"], f"made_mine=; made_others {tmp_path} mine")
    assert (done.code, done.out) == (0, "")


# --- file_state -------------------------------------------------------------------------------


def file_state(shell: str, path: Path, stat: str = "-", limit: int = 1000) -> str:
    """Return the line file_state prints for ``path``, named ``n``."""
    done = call(shell, ["enc.sh", "file_state.sh"], f'file_state bg== {path} {limit} "{stat}"')
    assert done.code == 0, done.err
    return done.out


def test_a_regular_file_has_its_mode_owner_size_and_content(shell: str, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("hi\n")
    path.chmod(0o640)
    owner = f"{path.stat().st_uid}:{path.stat().st_gid}"
    line = file_state(shell, path)
    assert line.startswith(f"file bg== file 0 ={path} 640 {owner} 3 ")


def test_the_probes_stat_is_used_as_given(shell: str, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("hi\n")
    line = file_state(shell, path, "600 0:0 3 regular file")
    assert line.startswith(f"file bg== file 0 ={path} 600 0:0 3 ")


def test_absent_dangling_loop_large_and_other_kinds(shell: str, tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "big").write_text("x" * 20)
    (tmp_path / "dir").mkdir()
    assert file_state(shell, tmp_path / "absent") == f"file bg== absent 0 ={tmp_path}/absent\n"
    assert file_state(shell, tmp_path / "dangling") == f"file bg== dangling 1 ={tmp_path}/gone\n"
    assert file_state(shell, tmp_path / "loop") == f"file bg== loop 1 ={tmp_path}/loop\n"
    assert file_state(shell, tmp_path / "big", limit=10).startswith("file bg== large 0 ")
    assert file_state(shell, tmp_path / "dir") == f"file bg== directory 0 ={tmp_path}/dir\n"


# --- secrets_state ----------------------------------------------------------------------------


def test_secrets_file_absent_and_leftovers(shell: str, tmp_path: Path) -> None:
    (tmp_path / "s.podstate-check").write_text("x")
    done = call(shell, ["enc.sh", "secrets_state.sh"], f"secrets_file {tmp_path}/s; echo $?")
    assert done.out == "secrets.leftover podstate-check\nsecrets.file absent\n1\n"


def test_secrets_file_compares_its_bytes_with_the_wanted_file(shell: str, tmp_path: Path) -> None:
    path = tmp_path / "s"
    path.write_text("HF_TOKEN=x\n")
    path.chmod(0o600)
    wanted = tmp_path / "wanted"
    owner = path.stat().st_uid
    for content, said in (("HF_TOKEN=x\n", "same"), ("HF_TOKEN=y\n", "differs")):
        wanted.write_text(b64(content.encode()) + "\n")
        done = call(shell, ["enc.sh", "secrets_state.sh"], f"secrets_file {path}; echo $?", wanted)
        assert done.out == f"secrets.file {owner} 600 {said}\n{0 if owner == 0 else 1}\n"


def test_secrets_file_of_another_kind_is_named(shell: str, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    done = call(shell, ["enc.sh", "secrets_state.sh"], f"secrets_file {tmp_path}/d; echo $?")
    assert done.out == "secrets.file directory\n1\n"


def test_secrets_value_says_same_differs_or_nothing(shell: str, tmp_path: Path) -> None:
    wanted = tmp_path / "wanted"
    wanted.write_text("dmFs\ndmFs\ndmFs\n")
    text = "secrets_value A xdmFs; secrets_value B xb3RoZXI=; secrets_value C ''"
    done = call(shell, ["enc.sh", "secrets_state.sh"], text, wanted)
    assert done.out == "secrets.value A same\nsecrets.value B differs\n"


# --- venv_missing -----------------------------------------------------------------------------


def test_venv_missing_names_what_has_no_dist_info(shell: str, tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for name in ("Torch-2.4.0.dist-info", "typing_extensions-4.0.dist-info", "old.pkg-1.egg-info"):
        (site / name).mkdir(parents=True)
    wanted = "torch typing-extensions old-pkg numpy flash-attn"
    done = call(shell, ["venv_missing.sh"], f"venv_missing {tmp_path}/venv '{wanted}'")
    assert (done.code, done.out) == (0, " numpy flash-attn")


def test_venv_missing_without_a_venv_names_every_one(shell: str, tmp_path: Path) -> None:
    done = call(shell, ["venv_missing.sh"], f"venv_missing {tmp_path}/none 'a b'")
    assert done.out == " a b"


# --- the commands: install_secret.sh, venv_snapshot.sh ----------------------------------------


def command(shell: str, name: str, *args: object) -> Ran:
    """Return what script ``name`` did run as podstate runs it: its text as ``sh -c``'s
    program, its name as $0, then ``args``."""
    quoted = " ".join(shlex.quote(str(arg)) for arg in args)
    return run(shell, f"set -- {quoted}\n{script(name)}")


@pytest.mark.skipif(os.geteuid() != 0, reason="install_secret.sh gives the file to root")
def test_install_secret_puts_the_file_in_place_root_only(shell: str, tmp_path: Path) -> None:
    upload, check, dest = tmp_path / "u", tmp_path / "c", tmp_path / "secrets.env"
    for path in (upload, check):
        path.write_text("HF_TOKEN=x\n")
    done = command(shell, "install_secret.sh", upload, check, dest)
    assert (done.code, done.out, dest.read_text()) == (0, "", "HF_TOKEN=x\n")
    assert (dest.stat().st_mode & 0o777, upload.exists(), check.exists()) == (0o600, False, False)


@pytest.mark.skipif(os.geteuid() != 0, reason="install_secret.sh gives the file to root")
def test_install_secret_refuses_a_directory_and_leaves_no_copy(shell: str, tmp_path: Path) -> None:
    upload, check, dest = tmp_path / "u", tmp_path / "c", tmp_path / "secrets.env"
    for path in (upload, check):
        path.write_text("HF_TOKEN=x\n")
    dest.mkdir()
    done = command(shell, "install_secret.sh", upload, check, dest)
    assert done.code == 1
    said = f"podstate: {dest}: is a directory, not the secrets file podstate writes; move it away\n"
    assert done.err == said
    assert (upload.exists(), check.exists()) == (False, False)


def test_venv_snapshot_packs_the_venv_and_names_its_sum(shell: str, tmp_path: Path) -> None:
    venv, snapshots = tmp_path / "venv-1", tmp_path / "snap"
    (venv / "bin").mkdir(parents=True)
    (venv / "RECORD").write_text("done\n")
    (venv / "bin" / "python").write_text("#!\n")
    snapshots.mkdir()
    (snapshots / "venv-old.tar.gz").write_text("old")
    (snapshots / "current.bad").write_text("bad")
    args = (venv, "RECORD", snapshots, "venv-new.tar.gz", "gzip", "current", "fp venv-new gzip")
    done = command(shell, "venv_snapshot.sh", *args)
    assert (done.code, done.out, done.err) == (0, "", "")
    archive = (snapshots / "venv-new.tar.gz").read_bytes()
    line = f"fp venv-new gzip {hashlib.sha256(archive).hexdigest()}\n"
    assert (snapshots / "current").read_text() == line
    assert sorted(p.name for p in snapshots.iterdir()) == ["current", "venv-new.tar.gz"]
    with tarfile.open(snapshots / "venv-new.tar.gz") as tar:
        assert "./bin/python" in tar.getnames()


def test_venv_snapshot_of_an_unbuilt_venv_fails_and_replaces_nothing(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "venv").mkdir()
    args = (tmp_path / "venv", "RECORD", tmp_path / "snap", "a.tar.gz", "gzip", "current", "l")
    done = command(shell, "venv_snapshot.sh", *args)
    assert done.code == 1
    assert done.err == f"podstate: venv snapshot failed: {tmp_path}/venv is not a built venv\n"
    assert list((tmp_path / "snap").iterdir()) == []
