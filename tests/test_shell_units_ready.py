"""scripts/podstate-ready.sh, the command a pod's jobs wait on, under dash, bash and busybox
sh: its functions sourced without its last line (``ready_main "$@"``), against a fixture
marker and a fixture /proc; and the whole command's answers.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from podstate.shell import script_file
from tests.shell_probe import SHELLS, Process, ProcTree

MAIN = 'ready_main "$@"\n'


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[ProcTree]:
    """Return a fixture /proc whose boot id is b00t and whose process 1 started at 77."""
    tree = ProcTree(tmp_path / "proc")
    tree.add(Process(1, "init", start=77))
    yield tree
    tree.close()


def call(shell: str, proc: ProcTree, marker: Path, program: str, *args: str) -> str:
    """Return what ``program`` printed after podstate-ready's functions, pointed at
    ``marker`` and ``proc``, and its status, as "STATUS|STDOUT|STDERR"."""
    text = script_file("podstate-ready.sh")
    assert text.endswith(MAIN)
    setup = f"marker={marker} proc_root={proc.root}"
    done = subprocess.run(
        [*SHELLS[shell], "-c", f"{text[: -len(MAIN)]}\n{setup}\n{program}", "sh", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return f"{done.returncode}|{done.stdout}|{done.stderr}"


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        ([], "0|0\n|"),
        (["--wait", "900"], "0|900\n|"),
        (["--help"], "0|usage: podstate-ready [--wait SECONDS]\n|"),
        (
            ["--wait", "soon"],
            "2||podstate-ready: --wait takes a number of seconds, e.g. --wait 900\n",
        ),
        (
            ["-x"],
            "2||podstate-ready: unknown argument '-x' (usage: podstate-ready [--wait SECONDS])\n",
        ),
    ],
)
def test_ready_args_reads_the_wait_or_answers_at_once(
    shell: str, proc: ProcTree, tmp_path: Path, args: list[str], answer: str
) -> None:
    assert call(shell, proc, tmp_path / "m", 'ready_args "$@"; echo "$wait"', *args) == answer


@pytest.mark.parametrize(
    ("marker", "ready"),
    [
        (None, "1"),
        ("", "1"),  # empty: not written whole
        ('{"ok": true}', "0"),  # names no container start
        ('{"container": "b00t:77"}', "0"),  # this one's
        ('{"container": "b00t:78"}', "1"),  # another start's, on a disk Vast kept
    ],
)
def test_ready_is_true_for_a_marker_of_this_containers_start(
    shell: str, proc: ProcTree, tmp_path: Path, marker: str | None, ready: str
) -> None:
    path = tmp_path / "ready"
    if marker is not None:
        path.write_text(marker)
    assert call(shell, proc, path, "ready; echo $?") == f"0|{ready}\n|"


def test_this_start_names_the_boot_and_process_1s_start(
    shell: str, proc: ProcTree, tmp_path: Path
) -> None:
    assert call(shell, proc, tmp_path / "m", "this_start") == '0|"container": "b00t:77"|'


def test_the_command_fails_with_one_line_when_no_apply_succeeded(
    shell: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [*SHELLS[shell], "-c", script_file("podstate-ready.sh"), "podstate-ready", "--wait", "0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if Path("/etc/podstate/ready").exists():
        pytest.skip("this machine has a ready marker")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "podstate-ready: not ready after 0 s: no podstate apply has succeeded since this "
        "container started\n"
    )
