"""podstate's blocks in the user's files (~/.bashrc, ~/.zshenv, ~/.ssh/authorized_keys), on
generated files: hooking, re-hooking, unhooking and removal keep every line that is not
podstate's, byte for byte and in order (marks missing, doubled, reversed or inside a longer
line; CRLF; no final newline; bytes that are not UTF-8; an empty file).

What is podstate's is told here by a model of its own (regular expressions over the bytes),
not by podstate.facts.blocks. The real code runs: the env and authorized_keys roles'
renderers and the removal's ``take_block`` directly, and the boot hook's ``hook`` function,
cut out of scripts/boot.sh as it is, under dash and under bash on files in a temp dir.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate.facts import blocks
from podstate.shell import script_file
from roles import authorized_keys as ak
from roles import env
from roles.removal import take_block

SHELLS = ("dash", "bash")
SETTINGS = settings(max_examples=60, deadline=None, database=None)
ENV_MARKS = (env.MARK_BEGIN.encode(), env.MARK_END.encode())
AK_MARKS = (ak.MARK_BEGIN.encode(), ak.MARK_END.encode())
KEYS = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPodstate one@ci", "ssh-rsa AAAAB3Nza two@ci"]
HOOK_FUNCTIONS = ("home", "put", "note", "fault", "why", "unhook", "hook")


# --- the model: which lines are podstate's --------------------------------------------------


def _model(data: bytes, marks: tuple[bytes, bytes]) -> tuple[list[bytes], int | None, list[int]]:
    """Return the user's lines of ``data`` (each with its ``\\n``, the last perhaps without),
    the index among them where the first begin mark stood (None: none), and the line numbers
    of the lone marks: a block is a begin-mark line, lines starting with neither mark, and an
    end-mark line; any other mark line is lone."""
    b, e = (re.escape(m) for m in marks)
    block = re.compile(
        rb"^" + b + rb".*\n(?:(?!" + b + rb"|" + e + rb").*\n)*" + e + rb".*(?:\n|\Z)", re.M
    )
    spans = [m.span() for m in block.finditer(data)]
    user: list[bytes] = []
    at, lone, offset = None, [], 0
    for number, line in enumerate(_lines(data), 1):
        inside = any(start <= offset < end for start, end in spans)
        if line.startswith(marks[0]) and at is None:
            at = len(user)
        if not inside and line.startswith(marks):
            lone.append(number)
        elif not inside:
            user.append(line)
        offset += len(line)
    return user, at, lone


def _lines(data: bytes) -> list[bytes]:
    """Return ``data``'s lines split at ``\\n`` alone, each with it."""
    return re.findall(rb"[^\n]*\n|[^\n]+\Z", data)


def _ended(lines: list[bytes]) -> bytes:
    """Return ``lines`` joined, the last given its ``\\n`` where it has none."""
    text = b"".join(lines)
    return text + b"\n" if text and not text.endswith(b"\n") else text


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# --- the generated files ---------------------------------------------------------------------

PIECES = [
    b"conda activate base", b"export PATH=/opt/x/bin:$PATH", b"ssh-ed25519 AAAAmine me@pc",
    b"a", b" ", b"\t", b"\r", b"\x00", b"\xff", b"\xc3", b"\x80", "é".encode(), b"\x0c",
    "\x85".encode(), "\u2028".encode(), b"\x1c", b"#", b">>>", b"<<<", b"# >>> podstate",
    *ENV_MARKS, *AK_MARKS, env.HOOK.splitlines()[1].encode(),
]  # fmt: skip
LINE = st.lists(st.sampled_from(PIECES), max_size=4).map(b"".join)
MARK_LINE = st.tuples(st.sampled_from([*ENV_MARKS, *AK_MARKS]), LINE).map(b"".join)
ENV_BLOCK = st.just(env.HOOK.encode())
AK_BLOCK = st.lists(st.sampled_from(KEYS), max_size=2).map(lambda keys: _bytes(ak.render("", keys)))
CHUNK = st.one_of(
    LINE.map(lambda line: line + b"\n"),
    LINE.map(lambda line: line + b"\r\n"),
    MARK_LINE.map(lambda line: line + b"\n"),
    MARK_LINE.map(lambda line: line + b"\r\n"),
    ENV_BLOCK,
    AK_BLOCK,
)
FILES = st.tuples(st.lists(CHUNK, max_size=10), st.sampled_from([b"", b"x", b"\xff", b"\r"])).map(
    lambda parts: b"".join(parts[0]) + parts[1]
)


# --- the boot hook's shell, run here ---------------------------------------------------------


def _function(text: str, name: str) -> str:
    """Return the definition of the shell function ``name`` in boot.sh, as it is there."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"    {name}() {{"))
    if lines[start].rstrip().endswith("}"):
        return lines[start]
    stop = lines.index("    }", start)
    return "\n".join(lines[start : stop + 1])


HOOK_SH = "\n".join(_function(script_file("boot.sh"), name) for name in HOOK_FUNCTIONS)


def boot_hook(shell: str, home: Path, name: str, data: bytes | None) -> tuple[bytes, str]:
    """Run the boot hook's ``hook`` for ``~/NAME``, holding ``data`` (None: no file), under
    ``shell`` with HOME at ``home``; return what the file holds then, and the hook's status."""
    work = home.parent / "w"
    work.mkdir(exist_ok=True)
    (work / "status").write_text("")
    target = home / name
    if data is not None:
        target.write_bytes(data)
    args = [base64.b64encode(v.encode()).decode() for v in (env.MARK_BEGIN, env.MARK_END)]
    hook = base64.b64encode(env.HOOK.encode()).decode()
    command = f'{HOOK_SH}\nhook {args[0]} {args[1]} "~/{name}" {hook}'
    run = subprocess.run(
        [shell, "-c", command],
        env={"PATH": os.environ["PATH"], "HOME": str(home), "work_dir": str(work), "LC_ALL": "C"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    return target.read_bytes(), (work / "status").read_text()


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pod") / "root"
    path.mkdir()
    return path


# --- properties --------------------------------------------------------------------------


@SETTINGS
@given(FILES)
def test_hooking_keeps_every_line_of_the_users_and_twice_is_once(data):
    user, _, lone = _model(data, ENV_MARKS)
    hooked = _bytes(env.render_hooks(_text(data)))
    assert hooked == env.HOOK.encode() + _ended(user) + env.HOOK.encode()
    assert env.render_hooks(_text(hooked)) == _text(hooked)
    assert env.render_hooks(_text(hooked), keep_runpod_tail=True) == _text(hooked)
    assert [n for n, _ in blocks.split(_text(data), env.MARK_BEGIN, env.MARK_END).lone] == lone


@SETTINGS
@given(FILES)
def test_unhooking_after_hooking_gives_back_the_users_lines(data):
    user, _, _ = _model(data, ENV_MARKS)
    hooked = env.render_hooks(_text(data))
    assert take_block(hooked, env.MARK_BEGIN, env.MARK_END) == _text(_ended(user))


@SETTINGS
@given(FILES)
def test_removal_takes_out_only_whole_blocks_and_refuses_beside_a_lone_mark(data):
    for begin, end in (ENV_MARKS, AK_MARKS):
        user, _, lone = _model(data, (begin, end))
        rest = take_block(_text(data), begin.decode(), end.decode())
        assert rest == (None if lone else _text(b"".join(user)))


@SETTINGS
@given(FILES, st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
def test_the_keys_block_keeps_every_other_line_where_it_was(data, keys):
    user, at, lone = _model(data, AK_MARKS)
    at = len(user) if at is None else at
    before, after = user[:at], user[at:]
    block = _bytes(ak.render("", keys))
    rendered = _bytes(ak.render(_text(data), keys))
    assert rendered == (_ended(before) if keys else b"".join(before)) + block + b"".join(after)
    assert ak.render(_text(rendered), keys) == _text(rendered)
    unkeyed = take_block(_text(rendered), ak.MARK_BEGIN, ak.MARK_END)
    assert unkeyed == _text((_ended(before) if keys else b"".join(before)) + b"".join(after))
    assert [n for n, _ in blocks.split(_text(data), ak.MARK_BEGIN, ak.MARK_END).lone] == lone


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", [".bashrc", ".zshenv"])
def test_the_boot_hook_hooks_as_the_role_does_and_says_which_mark_is_lone(shell, name, home):
    @settings(max_examples=25, deadline=None, database=None)
    @given(FILES)
    def hooks(data):
        _, _, lone = _model(data, ENV_MARKS)
        got, status = boot_hook(shell, home, name, data)
        assert got == _bytes(env.render_hooks(_text(data)))
        again, second = boot_hook(shell, home, name, got)
        assert again == got and second == f"restored hooks in {home / name}\n"
        if lone:
            assert f"error hook {home / name}: podstate's block there has lost a mark" in status
            assert f"(line {' '.join(map(str, lone))}: a mark in no block)" in status
        else:
            assert status == f"restored hooks in {home / name}\n"

    hooks()


@pytest.mark.parametrize("shell", SHELLS)
def test_the_boot_hook_makes_a_missing_file_with_the_hooks_alone(shell, tmp_path):
    (tmp_path / "root").mkdir()
    got, status = boot_hook(shell, tmp_path / "root", ".zshenv", None)
    assert got == (env.HOOK + env.HOOK).encode() and status.startswith("restored hooks")


# --- what the generators found, and the defect that started it, as plain examples -----------

HALF_DELETED = (
    env.HOOK + "# mine\n" + env.HOOK.rsplit(env.MARK_END, 1)[0]  # the end mark deleted
    + "conda activate base\nexport PATH=/opt/conda/bin:$PATH\n"
)  # fmt: skip


@pytest.mark.parametrize("shell", SHELLS)
def test_a_half_deleted_block_keeps_the_conda_and_path_lines_after_it(shell, tmp_path):
    user = "# mine\n" + env.HOOK.splitlines(keepends=True)[1]
    user += "conda activate base\nexport PATH=/opt/conda/bin:$PATH\n"
    assert env.render_hooks(HALF_DELETED) == env.HOOK + user + env.HOOK
    (tmp_path / "root").mkdir()
    got, status = boot_hook(shell, tmp_path / "root", ".bashrc", HALF_DELETED.encode())
    assert got.decode() == env.HOOK + user + env.HOOK
    assert "podstate's block there has lost a mark (line 5: a mark in no block)" in status
    assert take_block(HALF_DELETED, env.MARK_BEGIN, env.MARK_END) is None


def test_a_block_that_lost_its_end_mark_is_named_with_its_file_and_line():
    [lone] = blocks.split(HALF_DELETED, env.MARK_BEGIN, env.MARK_END).lone
    assert lone == (5, "begin")
    assert blocks.lost("~/.bashrc", env.MARK_BEGIN, env.MARK_END, (lone,)) == (
        "podstate's block in ~/.bashrc has lost its end mark: line 5 begins it "
        f"({env.MARK_BEGIN!r}), and no line starting with {env.MARK_END!r} ends it"
    )
    said = blocks.lost("f", "B", "E", ((1, "end"),) * 5)
    assert said.startswith("podstate's block in f has lost its begin mark: line 1 ends it")
    assert said.endswith("(and 2 more such marks)")


def test_the_lines_between_a_doubled_begin_mark_and_the_next_are_the_users():
    text = f"{env.MARK_BEGIN}\nconda activate base\n{env.HOOK}"
    assert env.render_hooks(text) == env.HOOK + "conda activate base\n" + env.HOOK
    keys = f"{ak.MARK_BEGIN}\n{KEYS[1]}\n{ak.render('', [KEYS[0]])}"
    assert ak.render(keys, [KEYS[0]]) == ak.render("", [KEYS[0]]) + KEYS[1] + "\n"
    assert take_block(text, env.MARK_BEGIN, env.MARK_END) is None


@pytest.mark.parametrize("end", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\r"])
def test_a_line_ends_at_a_newline_alone(end):
    text = f"x=1{end}{env.MARK_BEGIN}\nconda activate base\n"
    assert env.render_hooks(text) == env.HOOK + text + env.HOOK
    assert take_block(text, env.MARK_BEGIN, env.MARK_END) == text


@pytest.mark.parametrize("shell", SHELLS)
def test_blank_lines_at_either_end_are_the_users(shell, tmp_path):
    text = "\n\n# mine\n\n"
    assert env.render_hooks(text) == env.HOOK + text + env.HOOK
    (tmp_path / "root").mkdir()
    got, _ = boot_hook(shell, tmp_path / "root", ".bashrc", text.encode())
    assert got.decode() == env.HOOK + text + env.HOOK


def test_no_keys_leave_a_file_without_its_final_newline_as_it_was():
    assert ak.render(KEYS[1], []) == KEYS[1]
    assert ak.render(f"{KEYS[1]}\n{ak.MARK_BEGIN}\n{KEYS[0]}", []) == f"{KEYS[1]}\n{KEYS[0]}"


def test_a_stray_end_mark_stops_the_removal():
    """The lines before it may be podstate's (its begin mark deleted): keys, say."""
    text = f"{KEYS[0]}\n{ak.MARK_END}\n{KEYS[1]}\n"
    assert take_block(text, ak.MARK_BEGIN, ak.MARK_END) is None
    assert ak.render(text, [KEYS[0]]) == f"{KEYS[0]}\n{KEYS[1]}\n" + ak.render("", [KEYS[0]])
