"""The atomic write of a file (scripts/write_file.sh), each function run alone under dash, bash
and busybox sh on a temporary directory standing for the pod's filesystem: no pod.

The script is sourced with PODSTATE_WRITE_PART=functions, which defines its functions and
runs nothing; a test calls one in a subshell (``write_file`` exits, as the script does in
the subshell a write command runs it in). Commands are built by
podstate.run.bookkeeping.write_command's rules: the content as "=" and the bytes, or base64.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
from pathlib import Path

from tests.shell_change import Ran, run, sourced


def sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


def functions(shell: str, text: str, home: Path | None = None) -> Ran:
    """Return what ``text`` did after write_file.sh's functions were defined."""
    env = {"PODSTATE_WRITE_PART": "functions", "HOME": str(home or "/root")}
    return sourced(shell, ["write_file.sh"], text, env)


def write(
    shell: str, path: Path, content: str, how: str = "own", mode: str = "644", *rest: str
) -> Ran:
    """Return what write_file did for ``path`` and ``content`` (sent as "=" and the bytes)."""
    words = [str(path), how, mode, sha(content), "=" + content, *rest]
    return functions(shell, f"(write_file {' '.join(map(shlex.quote, words))})")


def mode_of(path: Path) -> str:
    return f"{path.stat().st_mode & 0o777:o}"


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".podstate." in p.name)


def test_a_file_podstate_owns_is_written_with_its_mode(shell: str, tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "f"
    assert write(shell, path, "hello\n", "own", "640") == Ran(0, "", "")
    assert path.read_text() == "hello\n" and mode_of(path) == "640"
    assert write(shell, path, "again", "own", "755").code == 0
    assert path.read_text() == "again" and mode_of(path) == "755"
    assert leftovers(path.parent) == []


def test_base64_content_is_decoded(shell: str, tmp_path: Path) -> None:
    data = "two\nlines \\ $x\n"
    word = base64.b64encode(data.encode()).decode()
    call = f"(write_file {tmp_path}/f own 600 {sha(data)} {word})"
    assert functions(shell, call).code == 0
    assert (tmp_path / "f").read_text() == data


def test_what_podstate_does_not_write_over_is_refused(shell: str, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    done = write(shell, tmp_path / "dir", "x")
    assert (done.code, done.err) == (
        1,
        f"podstate: {tmp_path}/dir: is a directory, not a regular file; move it away\n",
    )
    done = write(shell, tmp_path / "link", "x")
    assert done.err.endswith(
        "is a symbolic link, not the regular file podstate writes; remove the link\n"
    )
    assert write(shell, tmp_path / "link", "x", "edit", "644", "absent").err.endswith(
        "is a symbolic link to a file that does not exist\n"
    )


def test_an_edit_keeps_the_files_mode_and_writes_only_over_what_was_read(
    shell: str, tmp_path: Path
) -> None:
    path = tmp_path / ".bashrc"
    path.write_text("old\n")
    path.chmod(0o600)
    assert write(shell, path, "new\n", "edit", "644", sha("old\n")).code == 0
    assert path.read_text() == "new\n" and mode_of(path) == "600"
    done = write(shell, path, "newer\n", "edit", "644", sha("old\n"))
    assert done.code == 1 and "changed since podstate read it" in done.err
    assert path.read_text() == "new\n" and leftovers(tmp_path) == []
    assert write(shell, path, "x", "edit", "644", "absent").code == 1  # it is there now


def test_an_edit_through_a_link_replaces_its_target_and_keeps_the_link(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "real").write_text("old")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert write(shell, tmp_path / "link", "new", "edit", "644", sha("old")).code == 0
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_text() == "new"


def test_an_edit_with_an_owner_gives_the_file_that_mode_and_owner(
    shell: str, tmp_path: Path
) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    owner = f"{os.getuid()}:{os.getgid()}"
    assert write(shell, path, "new", "edit", "640", sha("old"), owner).code == 0
    assert mode_of(path) == "640"


def test_write_temp_gives_a_mode_a_umask_can_give_at_once(shell: str, tmp_path: Path) -> None:
    show = (
        'write_temp; echo "$write_umask [$write_chmod] ${write_tmp##*/}"; stat -c %a "$write_tmp"'
    )
    setup = f"write_dir={tmp_path} write_target={tmp_path}/f"
    out = [functions(shell, f"{setup} write_mode={m}; {show}").out for m in ("640", "0755")]
    pid_free = [line.split("\n") for line in out]
    assert pid_free[0][0].startswith("137 [] .f.podstate.") and pid_free[0][1] == "640"
    assert pid_free[1][0].startswith("077 [chmod] .f.podstate.") and pid_free[1][1] == "600"


def test_write_temp_takes_the_next_name_where_one_is_taken(shell: str, tmp_path: Path) -> None:
    text = (
        f"write_dir={tmp_path} write_target={tmp_path}/f write_mode=644; "
        f': >"{tmp_path}/.f.podstate.$$.0"; write_temp; echo "${{write_tmp##*.}}"'
    )
    assert functions(shell, text).out == "1\n"


def test_compose_puts_the_head_the_files_and_the_last_line_together(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "a").write_text("A\n")
    (tmp_path / "b").write_text("B")
    word = f"+last line\n2\n{tmp_path}/a\n~/b\nhead\n"
    done = functions(shell, f"compose {shlex.quote(word)}", home=tmp_path)
    assert done.out == "head\nA\nBlast line\n"


def test_a_composed_file_that_changed_since_it_was_read_is_refused(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "a").write_text("now\n")
    path = tmp_path / "f"
    word = f"+end\n1\n{tmp_path}/a\n"
    call = (
        f"(write_file {path} own 644 {sha('then' + chr(10) + 'end' + chr(10))} {shlex.quote(word)})"
    )
    done = functions(shell, call)
    assert done.code == 1 and "a file it copies on the pod changed" in done.err
    assert not path.exists() and leftovers(tmp_path) == []


def test_write_proved_names_what_does_not_read_back(shell: str, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    path.chmod(0o600)
    setup = f"write_path={path} write_target={path} write_how=own write_sum={sha('x')}"
    assert functions(shell, f"({setup} write_mode=600; write_proved '')").code == 0
    done = functions(shell, f"({setup} write_mode=644; write_proved '')")
    assert done.err == f"podstate: {path}: does not have mode 644 after the write\n"
    done = functions(shell, f"({setup} write_mode=600 write_sum={sha('y')}; write_proved '')")
    assert done.err == f"podstate: {path}: does not hold the content podstate wrote\n"


def test_a_last_write_in_a_fold_waits_for_the_proof(shell: str, tmp_path: Path) -> None:
    proofs = tmp_path / "proofs"
    proofs.touch()
    (tmp_path / "proofs.last").touch()
    path = tmp_path / "ready"
    words = [str(path), "last", "644", sha("r"), "=r"]
    text = (
        f"podstate_list={proofs} podstate_i=4\n(write_file {' '.join(words)}); echo $?\n"
        "m=@@m podstate_steps=' 4'; podstate_prove"
    )
    done = sourced(
        shell, ["fold_proof.sh", "write_file.sh"], text, {"PODSTATE_WRITE_PART": "functions"}
    )
    assert done.out == "0\n\n@@m ok 4\n"
    assert path.read_text() == "r"


def test_run_as_a_command_it_writes_at_once(shell: str, tmp_path: Path) -> None:
    from podstate.run.bookkeeping import write_command

    done = run(shell, write_command(str(tmp_path / "f"), "whole\n", True, "600"))
    assert done.code == 0 and (tmp_path / "f").read_text() == "whole\n"
