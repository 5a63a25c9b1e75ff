"""scripts/work.sh function by function, under dash, bash and busybox sh, against fixture
/proc trees (tests/shell_probe.py): no pod, no namespace, the machine's own /proc unread.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.shell_probe import SHELLS, Process, ProcTree, run

LIMITS = ("100", "10", "1048576", "4096")


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[ProcTree]:
    """Return an empty fixture /proc (an uptime of 1000 s, boot id b00t) with init."""
    tree = ProcTree(tmp_path / "proc")
    tree.add(Process(1, "init", start=5))
    yield tree
    tree.close()


def call(shell: str, proc: ProcTree, program: str, *args: str) -> str:
    """Return the stdout of ``program`` run after enc.sh and work.sh, reading ``proc``;
    stderr must stay empty and the shell must exit 0."""
    done = run(
        shell, ["enc.sh", "work.sh"], f'proc_root="$1"; shift\n{program}', str(proc.root), *args
    )
    assert (done.returncode, done.stderr) == (0, ""), done
    return done.stdout


def test_work_stat_reads_a_name_with_spaces_brackets_and_a_newline(
    shell: str, proc: ProcTree
) -> None:
    proc.add(
        Process(
            42,
            "a) b\n(c",
            state="R",
            ppid=7,
            flags=4,
            utime=1,
            stime=2,
            cutime=3,
            cstime=4,
            start=99,
        )
    )
    out = call(
        shell,
        proc,
        'work_stat 42; printf "%s|" "$?" "$w_c" "$w_run" "$w_pp" "$w_fl" "$w_st" "$w_cpu"',
    )
    assert out == "0|a) b\n(c|R|7|4|99|10|"


@pytest.mark.parametrize("pid", ["", "1x", "77"])
def test_work_stat_is_false_for_no_pid_or_no_process(shell: str, proc: ProcTree, pid: str) -> None:
    assert call(shell, proc, 'work_stat "$1"; echo $?', pid) == "1\n"


def test_work_stat_is_false_for_a_stat_line_too_short(shell: str, proc: ProcTree) -> None:
    (proc.add(Process(9)) / "stat").write_text("9 (x) S 1 1\n")
    assert call(shell, proc, "work_stat 9; echo $?") == "1\n"


def test_work_stat_reads_each_process_once(shell: str, proc: ProcTree) -> None:
    where = proc.add(Process(9, "first"))
    out = call(shell, proc, f"work_stat 9; rm {where}/stat; work_stat 9; echo $? $w_c")
    assert out == "0 first\n"


@pytest.mark.parametrize(
    ("process", "gone"),
    [
        (None, "0"),  # ended since it was listed
        (Process(9, state="Z"), "0"),  # a zombie
        (Process(9, flags=4 | 64), "0"),  # exiting: PF_EXITING
        (Process(9, comm="alive"), "1"),  # there: what could not be read was not its end
    ],
)
def test_work_gone_is_true_for_a_process_ended_or_ending(
    shell: str, proc: ProcTree, process: Process | None, gone: str
) -> None:
    if process is not None:
        proc.add(process)
    out = call(shell, proc, 'w_c=before; work_gone 9; echo "$? $w_c"')
    assert out.split(" ")[0] == gone
    if gone == "1":
        assert out == "1 before\n"  # its name is the one read before


@pytest.mark.parametrize(
    ("comm", "sshd"),
    [
        ("sshd", 0),
        ("sshd-session", 0),
        ("sshd-auth", 0),
        ("sshd: root@pts/0", 0),
        ("sshdx", 1),
        ("bash", 1),
    ],
)
def test_work_sshd_names_sshds_alone(shell: str, proc: ProcTree, comm: str, sshd: int) -> None:
    assert call(shell, proc, 'work_sshd "$1"; echo $?', comm) == f"{sshd}\n"


def _session(proc: ProcTree) -> None:
    """Give ``proc`` sshd's listener (30), a session's sshd (40) and its shell (50)."""
    proc.add(Process(30, "sshd", ppid=1))
    proc.add(Process(40, "sshd: root@notty", ppid=30))
    proc.add(Process(50, "bash", ppid=40))


def _me(program: str) -> str:
    """Return ``program`` run after this shell's own process is written into the tree, a
    child of process 50 (the shell's pid is known only once it runs)."""
    line = "S 50 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100" + " 0" * 32
    return f'mkdir -p "$proc_root/$$"; echo "$$ (sh) {line}" >"$proc_root/$$/stat"\n{program}'


def test_work_mine_is_this_shell_and_its_ancestors_below_the_listener(
    shell: str, proc: ProcTree
) -> None:
    _session(proc)
    out = call(shell, proc, _me('work_mine; echo "[$w_mine]" "$$"'))
    mine, me = out.split()[0:-1], out.split()[-1]
    assert " ".join(mine) == f"[ {me} 50 40 ]"


def test_work_mine_is_this_shell_alone_without_a_listener_above(shell: str, proc: ProcTree) -> None:
    proc.add(Process(50, "bash", ppid=1))
    out = call(shell, proc, _me('work_mine; echo "[$w_mine]" "$$"'))
    assert out.split()[0:-1] == ["[", out.split()[-1], "]"]


@pytest.mark.parametrize(
    ("pid", "how"),
    [
        (60, "ssh 40"),  # another session's shell: ssh, its sshd below the listener
        (70, "mine"),  # a child of this probe's shell
        (80, ""),  # a job of init's
    ],
)
def test_work_walk_tells_another_sessions_process_from_this_probes(
    shell: str, proc: ProcTree, pid: int, how: str
) -> None:
    _session(proc)
    proc.add(Process(60, "python", ppid=50))
    proc.add(Process(70, "cat", ppid=55))
    proc.add(Process(55, "sh", ppid=1))
    proc.add(Process(80, "python", ppid=1))
    program = (
        'w_mine=" 55 "; work_stat "$1"; work_walk "$1" "$w_pp" "$w_c"; echo "$w_how" ${w_sess-}'
    )
    assert call(shell, proc, program, str(pid)).split() == how.split()


@pytest.mark.parametrize(
    ("state", "tables", "live"),
    [
        ("01", True, 0),  # an established connection
        ("0A", True, 1),  # only listening: the client has gone
        ("01", False, 0),  # no TCP table to read: unknown, taken for alive
    ],
)
def test_work_live_is_false_for_a_session_whose_client_has_gone(
    shell: str, proc: ProcTree, state: str, tables: bool, live: int
) -> None:
    proc.add(Process(40, "sshd: root@notty"))
    proc.socket(40, 3, 777)
    if tables:
        proc.tcp((state, 777))
        proc.tcp(table="tcp6")
    program = 'w_live=" "; work_live 40; echo $?; work_live 40; echo $? "$w_live"'
    assert call(shell, proc, program) == f"{live}\n{live}  40={1 - live} \n"


def test_work_live_is_false_for_a_session_that_holds_no_socket(shell: str, proc: ProcTree) -> None:
    proc.add(Process(40, "sshd: root@notty"))
    proc.tcp(("01", 777))
    assert call(shell, proc, 'w_live=" "; work_live 40; echo $?') == "1\n"


@pytest.mark.parametrize(
    ("uptime", "now"), [("1000.05", "100005"), ("0.07", "7"), ("12.30", "1230")]
)
def test_work_clock_reads_the_uptime_in_centiseconds_and_the_container(
    shell: str, tmp_path: Path, uptime: str, now: str
) -> None:
    tree = ProcTree(tmp_path / "p", uptime=uptime, boot_id="b-1")
    tree.add(Process(1, "init", start=77))
    assert call(shell, tree, 'work_clock; echo $? "$w_now" "$w_boot"') == f"0 {now} b-1:77\n"


def test_work_clock_is_false_without_an_uptime(shell: str, proc: ProcTree) -> None:
    (proc.root / "uptime").unlink()
    assert call(shell, proc, "work_clock; echo $?") == "1\n"


RECORD = "v1 b00t:5 5000 12:100:30:400 13:7:0:0 end\n"


@pytest.mark.parametrize(
    ("record", "entries"),
    [
        (RECORD, "12:100:30:400 13:7:0:0 end"),
        (RECORD.replace("b00t:5", "b00t:6"), ""),  # another container's
        (RECORD.replace("5000", "200000"), ""),  # began after now: another boot's
        (RECORD.replace(" end", ""), ""),  # not whole
        (RECORD.replace("v1", "v2"), ""),
        (None, ""),
    ],
)
def test_work_record_is_none_unless_this_containers_and_whole(
    shell: str, proc: ProcTree, tmp_path: Path, record: str | None, entries: str
) -> None:
    path = tmp_path / "record"
    if record is not None:
        path.write_text(record)
    program = 'work_clock; work_record "$1"; echo "$w_entries"'
    assert call(shell, proc, program, str(path)) == f"{entries}\n"


def test_work_record_keeps_each_whole_entry_in_the_table_was(
    shell: str, proc: ProcTree, tmp_path: Path
) -> None:
    path = tmp_path / "record"
    path.write_text("v1 b00t:5 5000 12:100:30:400 x:1:2:3 14:1:2 15:1:2:3:4 end\n")
    program = 'work_clock; work_record "$1"; echo "${w_was_12-}|${w_was_14-}|${w_was_15-}|$w_since"'
    assert call(shell, proc, program, str(path)) == "100:30:400|||5000\n"


def test_work_io_adds_the_bytes_read_and_written(shell: str, proc: ProcTree) -> None:
    proc.add(Process(9), io=(300, 45))
    assert call(shell, proc, 'work_stat 9; work_io 9; echo $? "$w_io"') == "0 345\n"


def test_work_io_of_an_unreadable_process_is_a_line_and_false(shell: str, proc: ProcTree) -> None:
    proc.add(Process(9, "secret"), io=None)
    program = 'work_stat 9; enc "$w_c"; work_io 9; echo $?; printf %s "$w_found"'
    assert call(shell, proc, program) == "1\nwork.unread 9 =secret\n"


def test_work_io_of_an_unreadable_zombie_is_the_records(shell: str, proc: ProcTree) -> None:
    proc.add(Process(9, state="Z", start=100), io=None)
    program = (
        'w_was_9=100:5:777; work_stat 9; work_io 9; echo $? "$w_io"\n'
        'w_was_9=99:5:777; work_io 9; echo "$w_io"'
    )
    assert call(shell, proc, program) == "0 777\n0\n"


def test_work_count_adds_what_each_process_used_and_names_the_most(
    shell: str, proc: ProcTree
) -> None:
    proc.add(Process(8, "small", utime=40, start=100))
    proc.add(Process(9, "big", utime=300, start=100))
    program = (
        "w_cpu_sum=0 w_io_sum=0 w_cpu_most=-1 w_io_most=-1 w_signs= w_entries=x\n"
        "w_was_8=100:10:0 w_was_9=100:100:50\n"
        'for p in 8 9; do work_stat $p; enc "$w_c"; w_io=1000; work_count $p; done\n'
        'echo "$w_cpu_sum $w_io_sum [$w_cpu_most_by] [$w_io_most_by] [$w_signs]"'
    )
    assert call(shell, proc, program) == "230 1950 [9 =big] [8 =small] []\n"


@pytest.mark.parametrize(
    ("state", "start", "new"),
    [("S", 100, True), ("Z", 6000, True), ("Z", 100, False)],  # a zombie from before: not new
)
def test_work_count_names_a_process_not_in_the_record_new(
    shell: str, proc: ProcTree, state: str, start: int, new: bool
) -> None:
    proc.add(Process(9, "job", state=state, start=start))
    program = (
        'w_signs= w_entries=x w_since=5000; work_stat 9; enc "$w_c"; w_io=0\n'
        'work_count 9; printf %s "$w_signs"'
    )
    assert call(shell, proc, program) == ("work.busy new 9 =job\n" if new else "")


def test_work_ended_names_each_process_of_the_record_not_seen_with_its_start(
    shell: str, proc: ProcTree
) -> None:
    program = (
        'w_signs= w_entries="12:100:0:0 13:7:0:0 14:9:0:0 end" w_seen_12=100 w_seen_13=8\n'
        'work_ended; printf %s "$w_signs"'
    )
    assert call(shell, proc, program) == "work.busy gone 13 =\nwork.busy gone 14 =\n"


@pytest.mark.parametrize(
    ("cpu", "io", "lines"),
    [
        (150, 0, []),  # 100 + 5000 cs * 10 / 1000 = 150 allowed
        (151, 0, ["work.busy cpu 9 =big 151"]),
        (0, 1048576 + 204800, []),  # 1 MiB + 50 s at 4 KiB
        (0, 1048576 + 204801, ["work.busy io 8 =small 1253377"]),
    ],
)
def test_work_over_names_sums_above_what_the_period_allows(
    shell: str, proc: ProcTree, cpu: int, io: int, lines: list[str]
) -> None:
    program = (
        f'w_signs= w_age=5000 w_cpu_sum={cpu} w_io_sum={io} w_cpu_most_by="9 =big" '
        'w_io_most_by="8 =small"; work_over "$@"; printf %s "$w_signs"'
    )
    assert call(shell, proc, program, *LIMITS).splitlines() == lines


def test_work_keep_writes_the_record_or_says_it_cannot(
    shell: str, proc: ProcTree, tmp_path: Path
) -> None:
    program = (
        'w_lines= w_boot=b:5 w_now=700 w_keys=" 9:1:2:3"; work_keep "$1"\n'
        'printf "%s|" "$w_age" "$w_lines"'
    )
    assert call(shell, proc, program, str(tmp_path / "record")) == "0||"
    assert (tmp_path / "record").read_text() == "v1 b:5 700 9:1:2:3 end\n"
    assert call(shell, proc, program, str(tmp_path / "none" / "record")) == "0|work.unkept\n|"


def test_work_begins_a_period_then_finds_what_changed_since(
    shell: str, proc: ProcTree, tmp_path: Path
) -> None:
    """The whole function: a first reading begins the period; a second, once a process used
    CPU, one started and one ended, names each of them."""
    record = str(tmp_path / "record")
    proc.add(Process(9, "job", utime=10, start=100), io=(1, 1))
    proc.add(Process(10, "old", start=100))
    assert call(shell, proc, 'work "$@"', record, *LIMITS) == "work.age 0\n"
    assert Path(record).read_text() == "v1 b00t:5 100000 1:5:0:0 10:100:0:0 9:100:10:2 end\n"
    (proc.root / "uptime").write_text("1010.00 0\n")
    assert call(shell, proc, 'work "$@"', record, *LIMITS) == "work.age 1000\n"  # quiet
    (proc.root / "9" / "stat").write_text(Process(9, "job", utime=300, start=100).stat())
    proc.add(Process(11, "new one", start=100500))
    for name in ("stat", "io", "comm", "cmdline"):
        (proc.root / "10" / name).unlink()
    (proc.root / "10" / "fd").rmdir()
    (proc.root / "10" / "fdinfo").rmdir()
    (proc.root / "10").rmdir()
    assert call(shell, proc, 'work "$@"', record, *LIMITS) == (
        "work.busy new 11 bmV3IG9uZQ==\nwork.busy gone 10 =\nwork.busy cpu 9 =job 290\nwork.age 0\n"
    )


def test_work_prints_nothing_without_an_uptime(shell: str, proc: ProcTree, tmp_path: Path) -> None:
    (proc.root / "uptime").unlink()
    assert call(shell, proc, 'work "$@"', str(tmp_path / "record"), *LIMITS) == ""
    assert not (tmp_path / "record").exists()


_WORDS = st.sampled_from(
    ["v1", "b00t:5", "end", "5000", "12:100:30:400", "9:1:2", "x", ":", "1::2:3"]
)


@settings(max_examples=40, deadline=None)
@given(words=st.lists(_WORDS | st.text("0123456789:ab \t", max_size=12), max_size=8))
def test_work_reads_any_record_without_an_error_and_ends_with_its_age(
    tmp_path_factory: pytest.TempPathFactory, words: list[str]
) -> None:
    """Whatever RECORD holds (torn, another version's, noise), work answers: its last line is
    the period's age, nothing goes to stderr, and the record it leaves is whole."""
    where = tmp_path_factory.mktemp("any")
    tree = ProcTree(where / "proc")
    tree.add(Process(1, "init", start=5))
    tree.add(Process(9, "job", utime=10, start=100))
    record = where / "record"
    record.write_text(" ".join(words) + "\n")
    for shell in SHELLS:
        lines = call(shell, tree, 'work "$@"', str(record), *LIMITS).splitlines()
        assert lines[-1].startswith("work.age ") and lines[-1][9:].isdigit()
        assert record.read_text().startswith("v1 b00t:5 ") and record.read_text().endswith(" end\n")
