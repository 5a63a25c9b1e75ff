"""The record section's functions (scripts/made_state.sh), each run alone under dash, bash and
busybox sh on fixture files in a temporary directory, and a fixture /proc: no pod.

The script is sourced as the probe sources it (podstate.shell.script: without comments),
after the scripts whose functions it calls (enc, stats, file_state, repo_clean, made_busy,
made_proof); the record's variables are set as made_state sets them before each call.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.shell_change import Ran, git, sourced

NEEDS = ["enc.sh", "stats.sh", "file_state.sh", "repo_clean.sh", "busy.sh", "made_proof.sh"]


def made(shell: str, text: str, home: Path | None = None) -> Ran:
    """Return what ``text`` did after made_state.sh and what it needs were sourced."""
    return sourced(shell, [*NEEDS, "made_state.sh"], text, {"HOME": str(home or "/root")})


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def entry(line: str) -> str:
    """Return the shell that sets made_words and made_file for the record line ``line``, as
    made_entries does before it calls a function for one entry."""
    return f"made_words {line}; made_path $made_p; "


# --- made_path, made_words, made_read ---------------------------------------------------------


def test_made_path_reads_a_plain_base64_and_home_path_word(shell: str, tmp_path: Path) -> None:
    words = f"=/a/b {b64('/c d/e')} =~/f"
    text = f'for w in {words} !!; do made_path "$w" 2>/dev/null; echo "$? $made_file"; done'
    done = made(shell, text, home=tmp_path)
    assert done.out.splitlines() == ["0 /a/b", "0 /c d/e", f"0 {tmp_path}/f", "1 "]


def test_made_words_names_a_lines_first_four_words(shell: str) -> None:
    done = made(shell, 'made_words saved =/a S =/b extra; echo "$made_k|$made_p|$made_s|$made_b"')
    assert done.out == "saved|=/a|S|=/b\n"
    assert made(shell, 'made_words pod; echo "$made_k|$made_p|"').out == "pod||\n"


def test_made_read_keeps_every_line_and_refuses_a_character_podstate_never_writes(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "good").write_text("podstate-made 1\n\nfile =/a b,c 0644\n")
    (tmp_path / "bad").write_text("file =/a\nfile =/b*\n")
    (tmp_path / "dir").mkdir()
    read = 'made_read "$r"; echo "$? $made_txt"'
    good = made(shell, f"r={tmp_path}/good; {read}").out
    assert good == "0 podstate-made 1;;file =/a b,c 0644;\n"
    assert made(shell, f"r={tmp_path}/bad; {read}").out.startswith("1 ")
    assert made(shell, f"r={tmp_path}/dir; {read}").out == "1 \n"


# --- made_state, made_lines -------------------------------------------------------------------


def test_made_state_says_whether_a_record_is_absent_unreadable_or_a_file(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "bad").write_text("file =/a?\n")
    (tmp_path / "empty").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    names = ("gone", "bad", "empty", "link")
    calls = "; ".join(f"made_state {name} {tmp_path}/{name} 100" for name in names)
    assert made(shell, calls).out.splitlines() == [
        "made.record gone absent",
        "made.record bad unreadable",
        "made.record empty file",
        "made.record link unreadable",
    ]


def test_made_lines_hide_a_files_sums_and_keep_the_pod_id(shell: str) -> None:
    text = (
        "made_where=disk made_txt='podstate-made 1;pod =C.1/1;file =/a s1,s2 0644;"
        'stub =/b s3;dir =/c scratch;;\'; made_lines; echo "id $made_id"'
    )
    assert made(shell, text).out.splitlines() == [
        "made.line disk podstate-made 1",
        "made.line disk pod =C.1/1",
        "made.line disk file =/a - 0644",
        "made.line disk stub =/b -",
        "made.line disk dir =/c scratch",
        "made.line disk ",
        "id =C.1/1",
    ]


def test_made_lines_pass_a_torn_files_line_on_whole_and_go_on(shell: str) -> None:
    """A file or hook line without its SUMS (a record torn or written by hand) is passed on as
    it is, for the parser to find the record unreadable, and the lines after it are read:
    ``shift 3`` on it would end the whole probe under dash."""
    text = "made_where=volume made_txt='file =/a;hook;dir =/c scratch'; made_lines; echo end"
    ran = made(shell, text)
    assert ran.out.splitlines() == [
        "made.line volume file =/a",
        "made.line volume hook",
        "made.line volume dir =/c scratch",
        "end",
    ]


# --- made_files -------------------------------------------------------------------------------


def test_made_files_reads_the_files_the_probe_does_not_and_queues_their_sums(
    shell: str, tmp_path: Path
) -> None:
    for name in ("a", "b", "copy", "blocked"):
        (tmp_path / name).write_text(name)
    record = (
        f"pod =x;file ={tmp_path}/a S;file ={tmp_path}/b S;saved ={tmp_path}/a S ={tmp_path}/copy;"
        f"block ={tmp_path}/blocked;dir ={tmp_path}"
    )
    text = (
        f"made_asked=' ={tmp_path}/b' made_max=100 made_txt='{record}'; made_files\n"
        'echo "queued $made_sn $made_sf_1 $made_sf_3"; echo "mine$made_mine"'
    )
    out = made(shell, text).out.splitlines()
    assert [line.split(" ")[1] for line in out if line.startswith("file ")] == [
        f"={tmp_path}/a",
        f"={tmp_path}/copy",
        f"={tmp_path}/a",
        f"={tmp_path}/blocked",
    ]
    assert f"queued 3 {tmp_path}/a {tmp_path}/a" in out
    assert f"mine ={tmp_path}/a ={tmp_path}/b ={tmp_path}/a ={tmp_path}/blocked ={tmp_path}" in out


# --- made_queue, made_same_end ----------------------------------------------------------------


def test_made_same_end_says_which_files_hold_one_of_their_sums(shell: str, tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    lines = [f"file ={tmp_path}/a {'0' * 64},{sha(b'a')}", f"file ={tmp_path}/b {sha(b'a')}"]
    queue = "".join(
        f"{entry(line)}made_sn=$((made_sn + 1)); eval made_sf_$made_sn=\\$made_file; made_queue; "
        for line in [*lines, f"file ={tmp_path}/gone {sha(b'')}"]
    )
    done = made(shell, queue + "made_same_end")
    assert done.out.splitlines() == [f"made.same ={tmp_path}/a yes", f"made.same ={tmp_path}/b no"]


def test_made_same_end_with_nothing_queued_prints_nothing(shell: str) -> None:
    assert made(shell, "made_same_end; echo $?") == Ran(0, "0\n", "")


# --- made_unread, made_kept, made_prove -------------------------------------------------------


def test_made_unread_and_made_kept_read_the_probes_lists(shell: str, tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    text = (
        f"made_asked=' ={tmp_path}/x' made_keep=' =/k'; "
        f"for l in 'dir ={tmp_path}/x' 'dir ={tmp_path}/gone' 'dir =/k' 'dir =/tmp'; do "
        '  made_words $l; made_path $made_p; made_unread; u=$?; made_kept; echo "$u $?"; done'
    )
    assert made(shell, text).out.splitlines() == ["1 1", "1 1", "1 0", "0 1"]


def test_made_prove_says_whether_a_path_holds_podstates_marks(shell: str, tmp_path: Path) -> None:
    (tmp_path / "ours").write_text("# Managed by podstate: secrets\n")
    (tmp_path / "theirs").write_text("HF_TOKEN=x\n")
    (tmp_path / "scratch" / ".podstate-cache" / "pip").mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    lines = [
        f"secrets ={tmp_path}/ours",
        f"secrets ={tmp_path}/theirs",
        f"secrets ={tmp_path}/gone",
        f"dir ={tmp_path}/scratch scratch",
        f"dir ={tmp_path}/plain",
    ]
    done = made(shell, "".join(f"{entry(line)}made_prove; " for line in lines))
    assert done.out.splitlines() == [
        f"made.same ={tmp_path}/ours yes",
        f"made.same ={tmp_path}/theirs no",
        f"made.same ={tmp_path}/scratch yes",
    ]


# --- made_apt, made_repo ----------------------------------------------------------------------


def test_made_apt_names_a_package_dpkg_has_installed(shell: str) -> None:
    text = entry("apt =apt:dash") + "made_apt; " + entry("apt =apt:podstate-no-such") + "made_apt"
    assert made(shell, text).out == "made.kind =apt:dash installed\n"


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[Path]:
    """A clone of a repository with one commit, as podstate's repos role leaves it."""
    origin = tmp_path / "origin"
    git("init", "-q", "-b", "main", str(origin))
    git("-C", str(origin), "commit", "-q", "--allow-empty", "-m", "first")
    git("clone", "-q", str(origin), str(tmp_path / "clone"))
    yield tmp_path / "clone"


def test_made_repo_says_whether_a_checkout_holds_work_of_its_own(
    shell: str, checkout: Path
) -> None:
    call = entry(f"repo ={checkout}") + "made_repo"
    assert made(shell, call).out.splitlines() == [
        f"made.kind ={checkout} repo",
        f"made.same ={checkout} yes",
    ]
    (checkout / "notes.txt").write_text("mine")
    assert made(shell, call).out.splitlines()[1:] == [
        f"made.same ={checkout} no",
        f"made.work ={checkout} untracked files",
    ]
    assert made(shell, entry(f"repo ={checkout}/gone") + "made_repo").out == ""


# --- made_mount, made_kind --------------------------------------------------------------------


def test_made_mount_names_the_processes_using_it_and_a_file_it_holds(
    shell: str, tmp_path: Path
) -> None:
    mount, proc = tmp_path / "mnt", tmp_path / "proc"
    (mount / ".podstate-cache" / "pip").mkdir(parents=True)
    (mount / ".podstate-cache" / "pip" / "wheel").write_text("")
    for pid, cwd in (("41", mount), ("42", Path("/")), ("43", mount / "sub")):
        (proc / pid / "fd").mkdir(parents=True)
        (proc / pid / "cwd").symlink_to(cwd)
        (proc / pid / "comm").write_text(f"job{pid}\n")
    (proc / "42" / "fd" / "3").symlink_to(mount / "data")
    call = f"proc_root={proc} made_p=M; made_mount {mount}"
    busy = "made.busy M 41 =job41\nmade.busy M 43 =job43\nmade.busy M 42 =job42\n"  # cwd, then fd
    assert made(shell, call).out == busy
    (mount / "data").write_text("")
    assert made(shell, call).out == busy + f"made.held M ={mount}/data\n"


def test_made_kind_names_what_is_at_each_path_from_one_stat(shell: str, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "d")
    text = f"made_kind =d {tmp_path}/d =l {tmp_path}/l =gone {tmp_path}/gone; made_kind"
    kinds = made(shell, text).out.splitlines()
    assert kinds == ["made.kind =d directory", "made.kind =l symbolic link"]


# --- made_entries: one record, each kind ------------------------------------------------------


def test_made_entries_reads_each_kind_once_and_keeps_what_the_state_keeps(
    shell: str, tmp_path: Path
) -> None:
    (tmp_path / "venvs" / ".v-0123456789ab").mkdir(parents=True)
    (tmp_path / "venvs" / "v").symlink_to(".v-0123456789ab")
    (tmp_path / "sec").write_text("# Managed by podstate: x\n")
    (tmp_path / "f").write_text("f")
    record = ";".join(
        [
            "podstate-made 1",
            f"file ={tmp_path}/f {sha(b'f')}",
            f"secrets ={tmp_path}/sec",
            f"venv ={tmp_path}/venvs/v",
            f"repo ={tmp_path}/venvs",
            f"mount ={tmp_path}/venvs",
            "apt =apt:podstate-no-such",
            f"dir ={tmp_path}/gone",
        ]
    )
    keep = f"made_keep=' ={tmp_path}/venvs/v ={tmp_path}/venvs' made_asked=' ={tmp_path}/sec'"
    done = made(shell, f"{keep} made_txt='{record}'; made_entries; echo queued $made_cn")
    assert done.out.splitlines() == [
        f"made.same ={tmp_path}/sec yes",
        f"made.kind ={tmp_path}/venvs/v symbolic link",
        "queued 1",
    ]


def test_made_entries_names_what_is_left_where_a_mount_is_no_longer_mounted(
    shell: str, tmp_path: Path
) -> None:
    """A tmpfs gone already (a restart, a stop and start) leaves its mount point, or nothing:
    its kind is named so that removal takes the directory in the same run; a mount the
    state keeps is not looked at."""
    (tmp_path / "left").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    (tmp_path / "kept").mkdir()
    record = ";".join(
        [
            "podstate-made 1",
            *(f"mount ={tmp_path}/{n} made" for n in ("left", "link", "gone", "kept")),
        ]
    )
    done = made(shell, f"made_keep=' ={tmp_path}/kept' made_txt='{record}'; made_entries")
    assert done.out.splitlines() == [
        f"made.kind ={tmp_path}/left directory",
        f"made.kind ={tmp_path}/link symbolic link",
    ]
