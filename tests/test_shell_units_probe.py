"""The probe's shell besides work.sh, function by function, under dash, bash and busybox sh:
processes.sh, sessions.sh and busy.sh against fixture /proc trees, enc.sh and stats.sh
against fixture files (tests/shell_probe.py); no pod.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.shell_probe import Process, ProcTree, run


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[ProcTree]:
    """Return a fixture /proc with init (pid 1, a terminal of its own)."""
    tree = ProcTree(tmp_path / "proc")
    tree.add(Process(1, "init", session=1, tty=34816))
    yield tree
    tree.close()


def call(shell: str, scripts: list[str], proc: ProcTree | None, program: str, *args: str) -> str:
    """Return the stdout of ``program`` run after ``scripts``, reading ``proc`` (if any);
    the shell must exit 0 with nothing on stderr."""
    root = f'proc_root="{proc.root}"\n' if proc else ""
    done = run(shell, scripts, root + program, *args)
    assert (done.returncode, done.stderr) == (0, ""), done
    return done.stdout


PROBE = ["enc.sh", "work.sh"]


def test_processes_lists_what_is_neither_init_nor_an_ssh_sessions_nor_inert(
    shell: str, proc: ProcTree
) -> None:
    proc.add(Process(20, "python", ppid=1))
    proc.add(Process(30, "sshd", ppid=1))
    proc.add(Process(31, "bash", ppid=30))  # an SSH session's
    proc.add(Process(40, "jupyter", ppid=1))  # inert
    proc.add(Process(50, "my job", ppid=1))
    program = 'processes "$@"; echo "[$spool_grep] [$spool_pids]"'
    out = call(shell, [*PROBE, "processes.sh"], proc, program, "CUDA_.*", "jupyter tmux")
    assert out.splitlines() == [
        "proc 20 =python environ",
        "proc 50 bXkgam9i environ",
        "[CUDA_.*] [ 20 50]",
    ]


@pytest.mark.parametrize(("pid", "inside"), [(31, "0"), (32, "0"), (20, "1"), (60, "1")])
def test_in_ssh_session_is_true_under_sshd_alone(
    shell: str, proc: ProcTree, pid: int, inside: str
) -> None:
    proc.add(Process(20, "python", ppid=1))
    proc.add(Process(30, "sshd", ppid=1))
    proc.add(Process(31, "bash", ppid=30))
    proc.add(Process(32, "sleep", ppid=31))
    proc.add(Process(60, "orphan", ppid=59))  # its parent cannot be read
    program = 'in_ssh_session "$1"; echo $?'
    assert call(shell, [*PROBE, "processes.sh"], proc, program, str(pid)) == f"{inside}\n"


def test_sessions_lists_terminals_and_notebook_kernels(shell: str, proc: ProcTree) -> None:
    proc.add(Process(60, "bash", session=60, tty=34817))  # a login with a terminal
    proc.add(Process(61, "vim", session=60, tty=34817))  # in it, not its leader
    proc.add(Process(70, "python3"), cmdline="python3 -m ipykernel_launcher -f k.json")
    proc.add(Process(80, "python3"), cmdline="python3 train.py")
    out = call(shell, [*PROBE, "sessions.sh"], proc, "sessions")
    assert out.splitlines() == ["sess 60 tty =bash", "sess 70 kernel =python3"]


def test_made_busy_names_a_process_and_nothing_for_one_gone(shell: str, proc: ProcTree) -> None:
    proc.add(Process(5, "my app"))
    program = "made_busy W 5; made_busy W 5 unread; made_busy W 6"
    out = call(shell, ["enc.sh", "busy.sh"], proc, program)
    assert out.splitlines() == ["made.busy W 5 bXkgYXBw", "made.busy W 5 bXkgYXBw unread"]


def test_made_venv_busy_names_each_process_that_runs_from_the_venv_or_may(
    shell: str, proc: ProcTree, tmp_path: Path
) -> None:
    (proc.root / "1" / "maps").write_text("")
    opt = tmp_path / "opt"
    built = opt / ".venv-0123456789ab"
    (built / "lib").mkdir(parents=True)
    for pid, comm in ((5, "python"), (6, "worker"), (7, "reader"), (8, "secret"), (9, "idle")):
        where = proc.add(Process(pid, comm), cmdline="/usr/bin/python x" if pid > 5 else "")
        if pid != 8:  # its maps cannot be read
            (where / "maps").write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so\n")
    (proc.root / "5" / "cmdline").write_text(f"{opt}/venv/bin/python\0x\0")
    with (proc.root / "6" / "maps").open("a") as maps:
        maps.write(f"7f02-7f03 r-xp 0 08:01 2 {built}/lib/x.so\n")  # a library of it
    os.symlink(f"{built}/lib/data", proc.root / "7" / "fd" / "3")  # a file of it, open
    program = 'made_venv_busy W "$1"'
    out = call(shell, ["enc.sh", "busy.sh"], proc, program, f"{opt}/venv")
    assert out.splitlines() == [
        "made.busy W 5 =python",
        "made.busy W 7 =reader",
        "made.busy W 6 =worker",
        "made.busy W 8 =secret unread",
    ]


def test_made_venv_busy_says_nothing_when_no_process_uses_it(
    shell: str, proc: ProcTree, tmp_path: Path
) -> None:
    (tmp_path / "opt" / ".venv-0123456789ab").mkdir(parents=True)
    (proc.root / "1" / "maps").write_text("")
    (proc.add(Process(9, "idle")) / "maps").write_text("7f00-7f01 r-xp 0 08:01 1 /lib/c.so\n")
    out = call(shell, ["enc.sh", "busy.sh"], proc, 'made_venv_busy W "$1"', f"{tmp_path}/opt/venv")
    assert out == ""


@pytest.mark.parametrize(
    ("value", "word"),
    [("plain/path_1.2:x@y%z=+,-", "=plain/path_1.2:x@y%z=+,-"), ("a b", "YSBi"), ("", "=")],
)
def test_enc_sends_a_plain_value_as_it_is_and_any_other_in_base64(
    shell: str, value: str, word: str
) -> None:
    assert call(shell, ["enc.sh"], None, 'enc "$1"; echo "$enc_v"', value) == f"{word}\n"


def test_enc_in_the_spool_keeps_each_value_for_spool_end(shell: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("content\n")
    program = (
        f'enc_s=1; enc "a b"; echo "$enc_v"; enc "c\nd"; echo "$enc_v"\n'
        f'enc_file {tmp_path}/f; echo "$enc_v"; enc_file {tmp_path}/none; echo $?; spool_end'
    )
    lines = call(shell, ["enc.sh"], None, program).splitlines()
    assert lines[:6] == ["@1", "@2", "@3", "1", "spool 3", "spool.files 3"]
    tag, data = lines[6].split(" ")
    values, _, files = base64.b64decode(data).partition(b"\0\0")  # the values; the environs
    assert (tag, values) == ("spool.data", b"a b\0c\nd\0" + f"{tmp_path}/f".encode())
    assert b"content\n" in files  # the tar of the files


def test_enc_file_outside_the_spool_is_the_files_base64(shell: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x y\n")
    program = f'enc_file {tmp_path}/f; echo "$?$enc_v"'
    assert call(shell, ["enc.sh"], None, program) == "0eCB5Cg==\n"


def test_stats_asks_stat_once_for_every_path_and_marks_what_is_not_there(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "a").write_text("12345")
    (tmp_path / "b").mkdir()
    os.symlink("a", tmp_path / "l")
    os.symlink("none", tmp_path / "dangling")
    program = 'stats -L %s:%F "$@"; echo "$st_1|$st_2|$st_3|$st_4|$st_5"'
    paths = [tmp_path / n for n in ("a", "missing", "b", "l", "dangling")]
    out = call(shell, ["stats.sh"], None, program, *map(str, paths))
    assert out == "5:regular file|-|4096:directory|5:regular file|-\n"
    program = 'stats -P %F "$@"; echo "$st_1|$st_2"'
    paths = [tmp_path / "l", tmp_path / "dangling"]
    assert call(shell, ["stats.sh"], None, program, *map(str, paths)) == (
        "symbolic link|symbolic link\n"
    )


def test_real_resolves_links_on_the_way_and_keeps_what_is_not_there(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "d").mkdir()
    os.symlink("d", tmp_path / "l")
    program = 'real "$1"; echo "$r"'
    for path, resolved in [
        (f"{tmp_path}/d/x", f"{tmp_path}/d/x"),  # plain: as it is
        (f"{tmp_path}/l/x", f"{tmp_path}/d/x"),  # a link on the way
        (f"{tmp_path}//d/./y/../x", f"{tmp_path}/d/x"),  # not plain
    ]:
        assert call(shell, ["stats.sh"], None, program, path) == f"{resolved}\n"
