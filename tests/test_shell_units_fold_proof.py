"""The proof of a fold's file writes (scripts/fold_proof.sh), each function run alone under
dash, bash and busybox sh on files in a temporary directory: no pod, no lock.

The fold's variables are set as podstate.run.fold sets them: ``m`` (the markers' start),
``podstate_i`` (the step that runs), ``podstate_list`` (the list of writes, empty, with
LIST.last beside it) and ``podstate_steps`` (the steps run since the last proof).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.shell_change import Ran, sourced

MARK = "@@mark"


def sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


def fold(shell: str, tmp_path: Path, text: str, steps: str = "") -> Ran:
    """Return what ``text`` did after fold_proof.sh was sourced, with the fold's variables
    set, its list in ``tmp_path``."""
    lists = tmp_path / "list"
    lists.touch()
    (tmp_path / "list.last").touch()
    setup = f"m={MARK} podstate_i=1 podstate_list={lists} podstate_steps='{steps}'\n"
    return sourced(shell, ["fold_proof.sh"], setup + text)


def written(tmp_path: Path, name: str, content: str, mode: int = 0o644) -> Path:
    path = tmp_path / name
    path.write_text(content)
    path.chmod(mode)
    return path


def test_podstate_later_lists_a_write_and_a_write_that_waits(shell: str, tmp_path: Path) -> None:
    path = tmp_path / "f"
    calls = f"podstate_later {path} S 644; podstate_later {path} T - {path}.tmp; echo $?"
    assert fold(shell, tmp_path, calls).out == "0\n"
    lines = (tmp_path / "list").read_text().splitlines()
    assert lines == [f"1 S 644 {path}", f"1 T - {path}.tmp"]
    assert (tmp_path / "list.last").read_text() == f"1 {path}.tmp\n{path}\n"


def test_podstate_later_refuses_what_the_list_cannot_hold(shell: str, tmp_path: Path) -> None:
    calls = "podstate_later '/a b ' S -; echo $?; podstate_later '' S -; echo $?"
    calls += "; podstate_list=; podstate_later /a S -; echo $?"
    assert fold(shell, tmp_path, calls).out == "1\n1\n1\n"
    assert (tmp_path / "list").read_text() == ""


def test_podstate_bad_says_why_a_file_fails_its_proof(shell: str, tmp_path: Path) -> None:
    path = written(tmp_path, "f", "x", 0o600)
    say = '; echo "$? $proof_why"'
    calls = [
        f"podstate_bad 1 {path} {sha('x')} 600",
        f"podstate_bad 1 {path} {sha('x')} -",
        f"podstate_bad 1 {path} {sha('y')} 600",
        f"podstate_bad 1 {path} {sha('x')} 644",
        f"podstate_bad 1 {tmp_path}/gone {sha('x')} -",
    ]
    out = [fold(shell, tmp_path, call + say).out for call in calls]
    assert out == [
        "1 \n",
        "1 \n",
        f"0 podstate: {path}: does not hold the content podstate wrote\n",
        f"0 podstate: {path}: does not have mode 644 after the write\n",
        f"0 podstate: {tmp_path}/gone: does not hold the content podstate wrote\n",
    ]


def test_podstate_last_tells_a_write_a_later_one_replaced(shell: str, tmp_path: Path) -> None:
    (tmp_path / "list").write_text("1 S - /a\n2 S - /b\n3 S - /a\n")
    calls = "for n in 1 2 3; do podstate_last $n /a; echo $?; done; podstate_last 2 /b; echo $?"
    assert fold(shell, tmp_path, calls).out == "1\n1\n0\n0\n"


def test_podstate_holds_wants_every_sum_and_mode_at_once(shell: str, tmp_path: Path) -> None:
    a, b = written(tmp_path, "a", "a", 0o600), written(tmp_path, "b", "b")
    holds = f"1 {sha('a')} 600 {a}\n2 {sha('b')} - {b}\n"
    for listed, answer in [
        (holds, "0"),
        (holds.replace(" 600 ", " 644 "), "1"),
        (holds.replace(sha("b"), sha("c")), "1"),
        (holds + f"3 {sha('')} - {tmp_path}/gone\n", "1"),
    ]:
        (tmp_path / "list").write_text(listed)
        done = sourced(shell, ["fold_proof.sh"], f"podstate_list={tmp_path}/list; podstate_holds")
        assert str(done.code) == answer, listed


def test_podstate_prove_marks_each_step_ok_when_every_write_holds(
    shell: str, tmp_path: Path
) -> None:
    a = written(tmp_path, "a", "a")
    calls = f'podstate_later {a} {sha("a")} 644; podstate_prove; echo $?; echo "[$podstate_steps]"'
    done = fold(shell, tmp_path, calls, steps=" 1 2")
    assert done.out == f"\n{MARK} ok 1\n\n{MARK} ok 2\n0\n[]\n"
    assert (tmp_path / "list").read_text() == ""


def test_podstate_prove_names_the_step_whose_write_does_not_hold_and_what_waited(
    shell: str, tmp_path: Path
) -> None:
    a = written(tmp_path, "a", "changed")
    waiting = written(tmp_path, "w.tmp", "w")
    calls = (
        f"podstate_later {a} {sha('a')} 644; podstate_i=2; "
        f"podstate_later {tmp_path}/w {sha('w')} 644 {waiting}; podstate_prove; echo $?"
    )
    done = fold(shell, tmp_path, calls, steps=" 1 2 3")
    assert done.out.splitlines() == [
        "",
        f"{MARK} 1",
        f"podstate: {a}: does not hold the content podstate wrote",
        "",
        f"{MARK} 2",
        f"podstate: {tmp_path}/w: not written, since a write before it does not hold",
        "",
        f"{MARK} ok 3",
        "1",
    ]
    assert not waiting.exists() and not (tmp_path / "w").exists()
    assert (tmp_path / "list.last").read_text() == ""


def test_podstate_put_puts_a_waiting_write_in_place_once_proved(shell: str, tmp_path: Path) -> None:
    waiting = written(tmp_path, "w.tmp", "w")
    calls = f"podstate_later {tmp_path}/w {sha('w')} 644 {waiting}; podstate_prove; echo $?"
    assert fold(shell, tmp_path, calls, steps=" 1").out == f"\n{MARK} ok 1\n0\n"
    assert (tmp_path / "w").read_text() == "w" and not waiting.exists()
