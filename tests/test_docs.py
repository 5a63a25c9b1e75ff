"""The docs stay true: every command shown in README.md and docs/*.md is run by a test, or
checked here, or allowed by name with a reason; every relative link resolves.

Checked, without running anything: a ``podstate`` line parses with podstate's own argument
parser (and the files it names exist), a ``make`` line names Makefile targets, a ``pyinfra``
line uses options ``pyinfra --help`` lists and names files of this repository, a
``podstate-ready`` line uses options the script on the pods takes. Commands are read from
shell code blocks (``sh``, ``bash``, ``shell``, ``zsh``, ``$ `` lines of ``console``, and
lines of unlabeled blocks that start with ``$ `` or a known program) and from inline code in
the prose that starts with a checked program. No sandbox pod is started.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import glob
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from podstate import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LABELS = {"sh", "bash", "shell", "zsh"}
SHARDED_APPLY = "tests/test_shards.py::test_shard_composes_with_limit_and_lists_for_pyinfra"

# Command lines the docs show that a test runs (as written, or the same steps through
# Python): the line, then the test that runs it.
RUN_BY = {
    # pip installs the project's wheel into a fresh venv; pyinfra and podstate then run from it
    "python3 -m venv .venv && .venv/bin/pip install .": (
        "tests/test_deploy_dir.py::test_a_regular_install_runs_the_deploy_and_the_check_from_a_clone"
    ),
    # the new user's path: podstate and pyinfra from a wheel with uv, then podstate init
    "uv tool install podstate --with-executables-from pyinfra": (
        "tests/test_new_user.py::test_a_new_user_installs_inits_applies_and_upgrades"
    ),
    # the sharded apply: the shard's names as --limit options of one pyinfra apply
    "set --": SHARDED_APPLY,
    'for pod in $(podstate inventory --shard "$K/$N" --names); do set -- "$@" --limit "$pod"; '
    "done": SHARDED_APPLY,
    'if [ "$#" -gt 0 ]; then pyinfra -y "$@" inventories/pods.py deploy/*.py; fi': SHARDED_APPLY,
    # the template's container start command, with which sandbox pods restart
    "bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'": (
        "tests/test_boot.py::test_a_restart_with_the_hook_is_in_state_before_the_first_connection"
    ),
    # a Vast template's onstart line, which sandbox Vast instances run at every start
    "if [ -f /var/lib/podstate/boot.sh ]; then . /var/lib/podstate/boot.sh; fi": (
        "tests/test_vast_boot.py::test_the_hook_puts_a_vast_instance_back_before_anything_else"
    ),
}

# Commands that are neither run nor checkable here, by their first words, and why.
ALLOWED = {
    "export": "sets a variable of the reader's own shell (the RunPod API key, the SSH key)",
    ". .venv/bin/activate": "the shell's own `.`: activates the venv the line before made",
    "python train.py": "the reader's own job, shown after `podstate-ready &&`",
    "touch ~/.no_auto_tmux": "a line of a Vast template's onstart script, run by Vast",
}

# Placeholders of a synopsis that an option's type would refuse, and a value to parse them as.
SAMPLE_VALUES = {"N": "2", "SECONDS": "5"}
# A repository path a command names, by its first directory.
REPO_PATH = re.compile(
    r"(?:\./)?(?:bench|deploy|examples|inventories|roles|schema|scripts|tests)/\S*"
)


# --- reading the docs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A command line shown in the docs, where it is, and whether it stood in prose."""

    doc: Path
    line: int
    text: str
    inline: bool = False

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}: {self.text}"


def blocks(doc: Path) -> list[tuple[str, int, list[str]]]:
    """Return each fenced code block of ``doc`` as (label, line of its first body line, its
    lines dedented by the fence's indent); the label is "" for an unlabeled block."""
    found, lines = [], doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^(\s*)(```+|~~~+)\s*(\S*)", lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, label = opening.groups()
        body, i = [], i + 1
        start = i + 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        found.append((label.lower(), start, body))
        i += 1
    return found


def prose(doc: Path) -> str:
    """Return ``doc``'s text with every fenced code block blanked (line numbers kept)."""
    kept, fence = [], None
    for line in doc.read_text().splitlines():
        opening = re.match(r"^\s*(```+|~~~+)", line)
        if fence is None and opening:
            fence = opening.group(1)
            kept.append("")
        elif fence is not None:
            if line.strip() == fence:
                fence = None
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept)


def _command_lines(label: str, body: list[str]) -> list[tuple[int, str]]:
    """Return (offset, line) for each command of a block: a line ending in ``\\`` or followed
    by indented lines (a synopsis) is joined with them."""
    commands: list[tuple[int, str]] = []
    joining = False
    for offset, raw in enumerate(body):
        line = raw.rstrip()
        if label == "console" or (label == "" and line.startswith("$ ")):
            if not line.startswith("$ "):
                joining = False
                continue
            line = line[2:]
        elif label == "":
            first = line.split(maxsplit=1)[0] if line.strip() else ""
            if first not in known_programs() and not (joining and raw[:1].isspace()):
                joining = False
                continue
        if not line.strip() or (line.lstrip().startswith("#") and not joining):
            joining = False
            continue
        if commands and (joining or raw[:1].isspace()):
            commands[-1] = (commands[-1][0], commands[-1][1].rstrip("\\ ") + " " + line.strip())
        else:
            commands.append((offset, line.strip()))
        joining = line.endswith("\\")
    return commands


def commands(doc: Path) -> list[Command]:
    """Return every command ``doc`` shows: the lines of its shell code blocks, and inline
    code in its prose (or a ``$(...)`` in it) that starts with a checked program and has
    arguments."""
    found = []
    for label, start, body in blocks(doc):
        if label in SHELL_LABELS | {"console", ""}:
            for offset, text in _command_lines(label, body):
                found.append(Command(doc, start + offset, " ".join(text.split())))
    text = prose(doc)
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        code = " ".join(match.group(1).split())
        line = text.count("\n", 0, match.start()) + 1
        for span in [code, *re.findall(r"\$\(([^()]+)\)", code)]:  # and each $(command)
            words = [w for w in span.split() if not re.fullmatch(r"\w+=\S*", w)]
            if len(words) > 1 and words[0] in CHECKERS:
                found.append(Command(doc, line, span, inline=True))
    return found


def _strip_comment(text: str) -> str:
    """Return a command line without its trailing ``# comment``."""
    return re.sub(r"\s+#\s.*$", "", text).strip()


# --- what a command's words are -----------------------------------------------------------


def simple_commands(text: str) -> list[list[str]]:
    """Return the simple commands of a line (split at ``&&``, ``||``, ``;`` and ``|``), each
    as its words, with a synopsis's ``[`` ``]`` and ``...`` dropped and ``A|B`` read as A."""
    text = re.sub(r"\b([A-Z][\w/.]*)(?:\|[A-Z][\w/.]*)+", r"\1", text)
    text = text.replace("[", " ").replace("]", " ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    result: list[list[str]] = [[]]
    for word in lexer:
        if word in {"&&", "||", ";", "|", "&"}:
            result.append([])
        elif word != "...":
            result[-1].append(word.removesuffix("..."))
    return [words for words in result if words]


def is_placeholder(word: str) -> bool:
    """Whether a word stands for something the reader fills in (``FILE``, ``K/N``,
    ``"$pod"``, ``<pod>``) rather than a value to check."""
    return "$" in word or "<" in word or bool(re.fullmatch(r"[A-Z][A-Z0-9_/.]*", word))


def repo_path_exists(word: str) -> bool:
    """Whether a path (or glob) relative to the repository names something there."""
    return bool(glob.glob(str(ROOT / word))) or (ROOT / word).exists()


# --- the checkers -------------------------------------------------------------------------


@functools.cache
def podstate_parser() -> argparse.ArgumentParser:
    """Return podstate's own parser, and its subcommands', taking no abbreviated option:
    the docs show an option as it is named (``--pods``, not ``--pod``)."""
    top = cli.parser()
    parsers = [top]
    while parsers:
        parser = parsers.pop()
        parser.allow_abbrev = False
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return top


def check_podstate(words: list[str]) -> str | None:
    """Return why podstate's own parser refuses the arguments, or a file they name is not
    in the repository; None when both hold."""
    argv = [SAMPLE_VALUES.get(w, w) for w in words[1:]]
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = podstate_parser().parse_args(argv)
        except SystemExit as stop:
            if stop.code:
                return "podstate refuses it: " + errors.getvalue().strip().splitlines()[-1]
            return None
    for value in [getattr(args, "inventory", None), *(getattr(args, "deploy", None) or [])]:
        if value and not is_placeholder(value) and not repo_path_exists(value):
            return f"podstate is given {value}, which is not in the repository"
    return None


@functools.cache
def pyinfra_options() -> dict[str, bool]:
    """Return each option ``pyinfra --help`` lists, and whether it takes a value."""
    pyinfra = Path(sys.executable).parent / "pyinfra"
    text = subprocess.run(
        [str(pyinfra), "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    options: dict[str, bool] = {}
    for spec in re.findall(r"^  (-[^\n]*?)(?:\s{2,}|$)", text.split("Options:", 1)[1], re.M):
        *names, last = spec.split(", ")
        flag, _, metavar = last.partition(" ")
        for name in [*names, flag]:
            options[name] = bool(metavar)
    return options


def check_pyinfra(words: list[str]) -> str | None:
    """Return why pyinfra would not take the arguments: an option its ``--help`` does not
    list, or an inventory or deploy file that is not in the repository; None if it would."""
    options, positional = pyinfra_options(), []
    rest = iter(words[1:])
    for word in rest:
        if word.startswith("-"):
            name = re.sub(r"^-v+$", "-v", word.split("=", 1)[0])
            if name not in options:
                return f"pyinfra has no option {name} (pyinfra --help)"
            if options[name] and "=" not in word:
                next(rest, None)
        else:
            positional.append(word)
    if "--help" in words or "--version" in words:
        return None
    if len(positional) < 2:
        return "pyinfra takes an inventory and deploy files"
    for word in positional:
        if not is_placeholder(word) and not repo_path_exists(word):
            return f"pyinfra is given {word}, which is not in the repository"
    return None


@functools.cache
def make_targets() -> set[str]:
    """Return the targets the Makefile defines (its rules, not the files it builds)."""
    text = (ROOT / "Makefile").read_text()
    targets: set[str] = set()
    for names in re.findall(
        r"^([A-Za-z][\w.-]*(?:[ \t]+[A-Za-z][\w.-]*)*)[ \t]*:(?!=)", text, re.M
    ):
        targets.update(names.split())
    return targets


def check_make(words: list[str]) -> str | None:
    """Return the first word that is no Makefile target (a ``VAR=value`` is make's own),
    None when every one is a target."""
    for word in words[1:]:
        if "=" not in word and word not in make_targets():
            return f"the Makefile has no target {word}"
    return None


@functools.cache
def ready_options() -> set[str]:
    """Return the options the ``podstate-ready`` script on the pods takes (its ``case``)."""
    (script,) = ROOT.glob("podstate/**/podstate-ready.sh")
    options: set[str] = set()
    for pattern in re.findall(r"^\s*(-[-\w]+(?:\s*\|\s*-[-\w]+)*)\)", script.read_text(), re.M):
        options.update(p.strip() for p in pattern.split("|"))
    return options


def check_ready(words: list[str]) -> str | None:
    """Return the first option ``podstate-ready`` does not take, None when it takes all."""
    for word in words[1:]:
        if word.startswith("-") and word not in ready_options():
            return f"podstate-ready has no option {word}"
    return None


CHECKERS = {
    "podstate": check_podstate,
    "pyinfra": check_pyinfra,
    "make": check_make,
    "podstate-ready": check_ready,
}


def known_programs() -> set[str]:
    """Return the programs whose lines count as commands in an unlabeled block."""
    firsts = {key.split()[0] for key in [*ALLOWED, *RUN_BY]}
    common = {"python", "python3", "pip", "bash", "sh", "sudo", "git", "ssh", "ssh-keygen"}
    return set(CHECKERS) | firsts | common


def problem(command: Command) -> str | None:
    """Return why a shown command is not kept true (not run, checked nor allowed, or refused
    by its checker, or naming a repository path that is not there); None when it is."""
    text = _strip_comment(command.text)
    if text in RUN_BY:
        return None
    for words in simple_commands(text):
        while words and re.fullmatch(r"\w+=\S*", words[0]):  # VAR=value before a command
            words = words[1:]
        if not words:
            continue
        for word in words:
            if REPO_PATH.fullmatch(word) and not is_placeholder(word):
                if not repo_path_exists(word):
                    return f"{word} is not in the repository"
        if any(words[: len(key.split())] == key.split() for key in ALLOWED):
            continue
        if words[0] in CHECKERS:
            why = CHECKERS[words[0]](words)
            if why:
                return why
            continue
        return (
            f"{' '.join(words)!r} is not run by a test (RUN_BY), checked ({', '.join(CHECKERS)})"
            " nor allowed (ALLOWED): add it to one of them in tests/test_docs.py"
        )
    return None


# --- the commands -------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_command_shown_is_run_checked_or_allowed(doc):
    wrong = [f"{c.where()}\n    {why}" for c in commands(doc) if (why := problem(c))]
    assert not wrong, "\n".join(wrong)


def test_the_docs_show_commands_of_every_kind():
    """The reading finds what the docs show: a reader that found nothing would pass."""
    shown = [_strip_comment(c.text) for doc in DOCS for c in commands(doc)]
    firsts = {simple_commands(text)[0][0] for text in shown}
    assert set(CHECKERS) <= firsts, firsts
    assert len(shown) >= 40, shown


def test_every_test_named_as_running_a_command_exists():
    def exists(test: str) -> bool:
        path, _, name = test.partition("::")
        where = ROOT / path
        return where.is_file() and bool(re.search(rf"^def {name}\(", where.read_text(), re.M))

    missing = sorted(test for test in set(RUN_BY.values()) if not exists(test))
    assert not missing, f"RUN_BY names tests that do not exist: {missing}"


def test_every_run_or_allowed_command_is_still_shown():
    """An entry for a command the docs no longer show is removed, not kept."""
    shown = [_strip_comment(c.text) for doc in DOCS for c in commands(doc)]
    for line in RUN_BY:
        assert line in shown, f"RUN_BY names a command the docs do not show: {line}"
    words = [w for text in shown for w in simple_commands(text)]
    for key in ALLOWED:
        assert any(w[: len(key.split())] == key.split() for w in words), f"unused: {key}"


@pytest.mark.parametrize(
    "text,why",
    [
        ("podstate check --no-such-option", "podstate refuses it"),
        ("podstate chek", "podstate refuses it"),
        ("podstate check --deploy deploy/nosuch.py", "not in the repository"),
        ("podstate wait --timeout soon", "podstate refuses it"),
        ("podstate sandbox up --pod 2", "podstate refuses it"),
        ("make no-such-target", "no target no-such-target"),
        ("pyinfra -y inventories/nosuch.py deploy/*.py", "not in the repository"),
        ("pyinfra --frobnicate inventories/pods.py deploy/*.py", "no option --frobnicate"),
        ("pyinfra -y inventories/pods.py", "an inventory and deploy files"),
        ("podstate-ready --wiat 5", "no option --wiat"),
        ("rm -rf /scratch", "not run by a test"),
        ("podstate check && curl example.org", "not run by a test"),
        ("ssh-keygen -f examples/nosuch.pub", "not in the repository"),
    ],
)
def test_a_wrong_command_is_caught(text, why):
    result = problem(Command(ROOT / "README.md", 1, text))
    assert result and why in result, result


@pytest.mark.parametrize(
    "text",
    [
        "podstate check [--limit POD|GROUP|GLOB] [--deploy FILE ...] [--shard K/N]",
        "podstate sandbox up --pods N",
        "PODSTATE_SKIP_E2E=1 make test",
        "pyinfra -y --limit trainer-1 inventories/pods.py deploy/*.py",
        "podstate-ready --wait SECONDS && python train.py",
    ],
)
def test_a_right_command_passes(text):
    assert problem(Command(ROOT / "README.md", 1, text)) is None


def test_a_synopsis_across_lines_is_one_command(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```sh\npodstate check [--json r.json]\n    [--diff]   # c\n```\n")
    (command,) = commands(doc)
    assert _strip_comment(command.text) == "podstate check [--json r.json] [--diff]"


def test_unlabeled_blocks_hold_commands_only_where_they_start_like_one(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```\n2026-06-01 pod-2 ok\n$ podstate chek\nmake demo\n```\n")
    assert [c.text for c in commands(doc)] == ["podstate chek", "make demo"]


def test_inline_commands_are_read_from_the_prose_only(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text(
        'Run `podstate chek now`, or `eval "$(podstate sandbox apii)"`; the package\n'
        "`podstate` is a name, and `ssh pod CMD` no program checked here.\n"
        "```yaml\nx: `podstate nothing here`\n```\n"
    )
    assert [c.text for c in commands(doc)] == ["podstate chek now", "podstate sandbox apii"]


# --- the links ----------------------------------------------------------------------------


def slugs(doc: Path) -> set[str]:
    """Return the anchors GitHub gives the headings of ``doc`` (outside code blocks)."""
    seen: dict[str, int] = {}
    for title in re.findall(r"^#{1,6} (.+?)\s*#*$", prose(doc), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower().replace("`", "")).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    return {f"{s}-{n}" if n else s for s, count in seen.items() for n in range(count + 1)}


def links(doc: Path) -> list[tuple[int, str]]:
    """Return (line, target) for each inline link of ``doc``'s prose."""
    text = prose(doc)
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in re.finditer(r"\]\(([^)\s]+)\)", text)
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    wrong = []
    for line, target in links(doc):
        if re.match(r"[a-z][\w+.-]*:", target):  # https:, mailto:: not fetched here
            continue
        path, _, anchor = target.partition("#")
        where = (doc.parent / path).resolve() if path else doc
        if not where.exists():
            wrong.append(f"{doc.relative_to(ROOT)}:{line}: {target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in slugs(where):
            wrong.append(f"{doc.relative_to(ROOT)}:{line}: {target}: no such heading")
    assert not wrong, "\n".join(wrong)


def test_a_broken_link_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Two words\n")
    doc = tmp_path / "b.md"
    doc.write_text("[x](a.md#two-words) [y](a.md#nope) [z](missing.md)\n")
    assert [t for _, t in links(doc)] == ["a.md#two-words", "a.md#nope", "missing.md"]
    assert "two-words" in slugs(tmp_path / "a.md") and "nope" not in slugs(tmp_path / "a.md")


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for _, t in links(ROOT / "README.md")}
    assert set(DOCS[1:]) <= linked, set(DOCS[1:]) - linked


def test_the_docs_name_no_module_of_podstate():
    """Modules move between podstate's packages; the docs name behaviour and user-facing
    files, never a module's path."""
    for doc in DOCS:
        named = re.findall(r"(?<![\w/.~-])podstate/[\w/]*\.py\b", doc.read_text())
        assert not named, f"{doc.relative_to(ROOT)} names {named}"


# --- the reference pages ------------------------------------------------------------------

OPTIONS_PAGE = ROOT / "docs" / "options.md"
ENVIRONMENT_PAGE = ROOT / "docs" / "environment.md"
# Names of RunPod's that are written on the pods, not read from the operator's environment:
# the sandbox writes them to its pods' /etc/rp_environment, as RunPod's start script does.
ON_THE_PODS = {
    "RUNPOD_CPU_COUNT",
    "RUNPOD_DC_ID",
    "RUNPOD_GPU_COUNT",
    "RUNPOD_POD_HOSTNAME",
    "RUNPOD_PUBLIC_IP",
    "RUNPOD_TCP_PORT_22",
}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Return every subcommand's parser by its words (``report merge`` included)."""
    found, todo = {}, [((), cli.parser())]
    while todo:
        words, parser = todo.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[" ".join((*words, name))] = sub
                    todo.append(((*words, name), sub))
    return found


def options_shown(page: Path) -> dict[str, set[str]]:
    """Return, per ``## podstate WORDS`` section of ``page``, the options its tables list
    (the first cell of each row, as ``--name``)."""
    shown: dict[str, set[str]] = {}
    section = None
    for line in prose(page).splitlines():
        heading = re.match(r"^## podstate ([a-z ]+)$", line)
        if heading:
            section = heading.group(1)
            shown[section] = set()
        elif section and (row := re.match(r"^\| `(--[\w-]+)", line)):
            shown[section].add(row.group(1))
    return shown


def test_every_option_is_in_the_options_page_and_every_one_there_exists():
    shown = options_shown(OPTIONS_PAGE)
    for words, parser in subcommands().items():
        options = {
            action.option_strings[-1]
            for action in parser._actions
            if action.option_strings
            and action.help != argparse.SUPPRESS
            and not isinstance(action, argparse._HelpAction)
        }
        if words == "report":
            continue  # its one action, merge, has a section of its own
        assert shown.get(words, set()) == options, f"docs/options.md, podstate {words}"
    assert "`podstate --version`" in OPTIONS_PAGE.read_text()


def environment_read() -> set[str]:
    """Return every PODSTATE_*/RUNPOD_* name in a string of podstate's code (the package, the
    inventory and deploy files, the roles, the tests' fixtures), but for those on the pods."""
    sources = [
        *(ROOT / "podstate").rglob("*.py"),
        *(ROOT / "roles").glob("*.py"),
        *(ROOT / "inventories").glob("*.py"),
        *(ROOT / "deploy").glob("*.py"),
        ROOT / "tests" / "conftest.py",
    ]
    names: set[str] = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names |= set(re.findall(r"\b(?:PODSTATE|RUNPOD)_[A-Z0-9_]*[A-Z0-9]\b", node.value))
    return names - ON_THE_PODS


def test_every_environment_variable_read_is_in_the_environment_page():
    read = environment_read()
    assert {"PODSTATE_PODS", "RUNPOD_API_KEY", "PODSTATE_SKIP_E2E"} <= read, read
    listed = set(re.findall(r"^\| `([A-Z0-9_]+)`", ENVIRONMENT_PAGE.read_text(), re.M))
    page = ENVIRONMENT_PAGE.read_text()
    missing = sorted(name for name in read if name not in listed and f"`{name}`" not in page)
    assert not missing, f"docs/environment.md does not list {missing}"


def test_a_missing_option_or_variable_would_be_caught(tmp_path):
    page = tmp_path / "options.md"
    page.write_text("## podstate check\n\n| option | x |\n|---|---|\n| `--diff` | y |\n")
    assert options_shown(page) == {"check": {"--diff"}}
    assert "--json" in {
        a.option_strings[-1] for a in subcommands()["check"]._actions if a.option_strings
    }


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_sh_blocks_are_posix_sh(doc):
    """A block fenced as ``sh`` parses with dash (Debian's and Ubuntu's /bin/sh, which CI
    runners' ``sh`` is): bash's arrays and the like belong in a ``bash`` block."""
    for label, line, body in blocks(doc):
        if label == "sh":
            parsed = subprocess.run(
                ["dash", "-n"], input="\n".join(body) + "\n", capture_output=True, text=True
            )
            assert parsed.returncode == 0, f"{doc.name}, line {line}: {parsed.stderr.strip()}"


def test_every_property_test_is_said_in_the_safety_page():
    """docs/safety.md says what each property test guarantees: none is added unsaid."""
    page = (ROOT / "docs/safety.md").read_text()
    missing = [p.name for p in sorted((ROOT / "tests").glob("test_*props*.py"))]
    assert [name for name in missing if f"`tests/{name}`" not in page] == []
