"""Every command podstate sends fits in one argument, checked when the state is validated."""

from __future__ import annotations

import base64
import errno
import shutil
import subprocess
from pathlib import Path

import pytest

from podstate.desired.errors import Layer, SpecError
from podstate.desired.typed import build
from podstate.facts import probe
from podstate.facts.venv import Python
from podstate.inventory.fleet import resolve
from podstate.limits import MAX_FILE
from podstate.operations import venv as venv_ops
from podstate.pod import fits
from podstate.roles import env
from podstate.roles import venv as venv_role
from podstate.run import bookkeeping
from tests import probing


def resolved(data: dict, root=None) -> dict:
    return resolve([Layer("f.yaml", data, root)], "p")


def test_arg_max_is_what_linux_refuses():
    """One byte less starts a program; ARG_MAX bytes (the NUL makes one more) do not."""
    true = shutil.which("true")
    assert subprocess.run([true, "x" * (fits.ARG_MAX - 1)]).returncode == 0
    with pytest.raises(OSError) as error:
        subprocess.run([true, "x" * fits.ARG_MAX])
    assert error.value.errno == errno.E2BIG


def test_the_largest_managed_file_fits_as_podstate_sends_it():
    """A user's file at the size the probe still reads, with podstate's hooks added, and a
    file of ``files`` at the size validation allows at a path of the longest length: each
    written in one step, as podstate.run.fold sends it, is under the limit with room left."""
    hooked = bookkeeping.write_command("~/.zshenv", "x" * MAX_FILE + 2 * env.HOOK, False, "644")
    assert fits.change_length(hooked) < fits.ARG_MAX - 16_000
    longest = bookkeeping.write_command("/" + "a" * 4095, "\udcff" * MAX_FILE, True, "600")
    assert fits.change_length(longest) < fits.ARG_MAX - 16_000


@pytest.mark.parametrize(
    "data,expected",
    [
        (
            {"env": {f"V{i}": "x" * 16000 for i in range(5)}},
            "env: /etc/profile.d/podstate.sh would hold 80187 bytes, more than the 65536 "
            "podstate writes in one command; keep a large value in a file",
        ),
        (
            {"venv": {"path": "/v", "extra_index_urls": [f"https://{'x' * 4000}"] * 30}},
            r"venv: building it takes a command of \d+ bytes, more than the 131072 Linux passes "
            "as one: list fewer distributions or options",
        ),
    ],
)
def test_a_state_whose_command_would_not_fit_is_refused_in_one_line(data, expected):
    with pytest.raises(SpecError, match=f"^f.yaml: {expected}") as error:
        resolved(data)
    assert "\n" not in str(error.value) and str(error.value).endswith(" (pod p)")


def test_the_probe_reads_any_number_of_paths_from_a_command_of_a_few_bytes(tmp_path):
    """States whose probe program is larger than one argument may be are accepted, and read:
    the program travels on the command's stdin, the command line stays ``READER``."""
    resolved({"files": {f"/{'d' * 1000}/{i}": {"content": "x"} for i in range(300)}})
    deep = tmp_path / ("d" * 200)
    deep.mkdir()
    files = [str(deep / f"{'f' * 200}{i}") for i in range(400)]
    for i, path in enumerate(files[:3]):
        Path(path).write_text(f"file {i}\n")
    program = probe.payload({"paths": [], "files": files})
    assert sum(len(line) for line in program) > fits.ARG_MAX
    assert fits.login_length(probe.READER) < 100
    out = probing.run(files=files)
    assert out.returncode == 0, out.stderr
    read = probe.parse_probe(out.stdout.splitlines()).files
    assert [read[path].content for path in files[:3]] == ["file 0\n", "file 1\n", "file 2\n"]
    assert {read[path].state for path in files[3:]} == {"absent"}


def test_a_40k_lock_file_never_travels_in_a_command(tmp_path):
    """The issue's case: a lock file of 40 KiB once made a build command of 129 KiB (twice
    base64, in the command and in the record). Its text now travels only as the content of
    an upload, and the record names it by its hash."""
    lock = "".join(f"package-{i:04d}==1.0.{i}  # via the-team-app\n" for i in range(1000))
    assert 40 << 10 < len(lock) < 48 << 10
    (tmp_path / "lock.txt").write_text(lock)
    state = resolved({"venv": {"path": "/opt/venv", "requirements": "lock.txt"}}, tmp_path)
    python = Python("/usr/bin/python3.11", "3.11.2", ensurepip=True)
    want = venv_role.describe(build(state).venv, python, {"TMPDIR": "/tmp"})
    command = venv_ops.venv_command(want, "/opt/.podstate/uv")
    encoded = base64.b64encode(lock.encode()).decode()
    assert "package-0999" not in want.record and encoded[:64] not in command
    assert fits.change_length(command) < 64 << 10
    assert want.requirements == lock  # uploaded to want.requirements_file (test_venv.py)
