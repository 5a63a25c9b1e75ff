"""Each script's header table of what it prints and the codes it answers with, held to the
script's code.

A script in podstate/scripts/ declares, in its first block of comments (the lines before
its first line of code), the lines it prints and its exit codes, in one format::

    # Prints (stdout, one line each):
    #   TAG FIELD...        what the line means
    #                       (a deeper indent goes on with the line above)
    #   (nothing)           when ...
    # Exits:
    #   0  what it means
    #   3  what it means
    #   *  another status, passed on (a command's own)

A file of functions sourced into another program has ``# Returns:`` instead of (or, for a
script with functions of its own whose codes its body acts on, beside) ``# Exits:``, each
row ``name N  meaning``: a code that callers of function ``name`` act on.

What is held, for every script with an ``# Exits:`` or ``# Returns:`` table:
- every literal ``exit N`` and ``return N`` (N a number) in its code is 0 or in a table;
- every numeric code of ``# Exits:`` occurs in the code as ``exit N`` or ``return N``, and
  every ``name N`` of ``# Returns:`` names a function of the script whose body has
  ``return N`` or ``exit N`` (N not 0);
- every TAG of ``# Prints`` (but ``(nothing)`` and ``<data>`` in angle brackets) begins a
  quoted string of the code (after any leading ``%s``, ``\\n`` or expansion: a line built in
  a variable), or is an unquoted ``echo``'s or ``printf``'s first word.
Every script has one, and every function of a script is about 40 lines at most
(``LONGEST``), so that a reader can hold it whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "podstate" / "scripts"
HEADS = {
    "# Prints (stdout, one line each):": "prints",
    "# Exits:": "exits",
    "# Returns:": "returns",
}
_ROW = re.compile(r"^#   (\S.*)$")
_MORE = re.compile(r"^#    +\S")
_LITERAL = re.compile(r"\b(exit|return)[ \t]+([0-9]+)\b")
_FUNCTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(\)\s*\{")


@dataclass
class Table:
    """What a script's header declares: TAGs printed, exit codes, and each function's
    return codes (codes as written: a number or ``*``)."""

    prints: list[str] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)
    returns: list[tuple[str, str]] = field(default_factory=list)
    has_codes: bool = False


def header(text: str) -> list[str]:
    """Return the script's first block of comments: its lines up to its first line of code
    (blank lines and the ``#!`` line included, as they are)."""
    lines = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        lines.append(line.rstrip())
    return lines


def table(text: str) -> Table:
    """Return the tables in ``text``'s header: each row's first word (or, under
    ``# Returns:``, its first two), read until a line that is neither a row nor a row's
    continuation."""
    found = Table()
    section = ""
    for line in header(text):
        if line in HEADS:
            section = HEADS[line]
            found.has_codes = found.has_codes or section != "prints"
            continue
        row = _ROW.match(line)
        if section and row:
            words = row.group(1).split()
            if section == "prints":
                found.prints.append(words[0])
            elif section == "exits":
                found.exits.append(words[0])
            else:
                found.returns.append((words[0], words[1] if len(words) > 1 else ""))
        elif not (section and _MORE.match(line)):
            section = ""
    return found


def code(text: str) -> list[str]:
    """Return ``text``'s lines of code, comments left out (a whole-line comment, and the
    rest of a line from a ``#`` after a blank)."""
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        lines.append(re.sub(r"(^|\s)#.*$", "", line))
    return lines


def bodies(lines: list[str]) -> dict[str, list[str]]:
    """Return each function's body (``name() {`` to the first ``}`` at the line's start, or
    the one line of ``name() { ...; }``)."""
    found: dict[str, list[str]] = {}
    name = ""
    for line in lines:
        start = _FUNCTION.match(line)
        if start and not name:
            found[start.group(1)] = [line]
            name = "" if line.rstrip().endswith("}") else start.group(1)  # a one-line body
        elif name:
            found[name].append(line)
            if line.startswith("}"):
                name = ""
    return found


def printed(tag: str, source: str) -> bool:
    """Return whether ``tag`` begins a line the code prints or builds: the start of a quoted
    string (after any leading ``%s``, ``\\n`` or expansion), or an unquoted echo's or printf's
    first word."""
    end = r"(?![A-Za-z0-9_.-])"
    quoted = r"[\"'](?:%s|\\n|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*)*" + re.escape(tag) + end
    bare = r"\b(?:echo|printf)[ \t]+" + re.escape(tag) + end
    return bool(re.search(quoted, source) or re.search(bare, source))


def _answers(number: str, source: str) -> bool:
    """Return whether ``source`` has ``exit NUMBER`` or ``return NUMBER``."""
    return bool(re.search(rf"\b(exit|return)[ \t]+{number}\b", source))


def problems(text: str) -> list[str]:
    """Return what ``text``'s tables and code disagree on, one sentence each (none: they
    agree, or it has no table of codes)."""
    found = table(text)
    if not found.has_codes:
        return []
    lines = code(text)
    source = "\n".join(lines)
    out = []
    declared = set(found.exits) | {n for _, n in found.returns}
    for word, number in _LITERAL.findall(source):
        if number != "0" and number not in declared:
            out.append(f"`{word} {number}` is in no table")
    for number in found.exits:
        if number.isdigit() and number != "0" and not _answers(number, source):
            out.append(f"exit code {number} of the table is nowhere in the code")
    functions = bodies(lines)
    for name, number in found.returns:
        if name not in functions:
            out.append(f"`{name}` of the Returns table is no function of the script")
        elif number.isdigit() and number != "0":
            if not _answers(number, "\n".join(functions[name])):
                out.append(f"`{name}` never returns {number}, as its table says")
    for tag in found.prints:
        if tag == "(nothing)" or tag.startswith("<"):
            continue
        if not printed(tag, source):
            out.append(f"`{tag}` of the Prints table is printed nowhere")
    return out


def _tabled() -> list[Path]:
    """Return the scripts with a table of codes."""
    return sorted(p for p in SCRIPTS.glob("*.sh") if table(p.read_text()).has_codes)


@pytest.mark.parametrize("path", _tabled(), ids=lambda p: p.name)
def test_a_scripts_tables_say_what_its_code_prints_and_answers(path: Path) -> None:
    assert problems(path.read_text()) == []


LONGEST = 45  # lines of a function, its braces included: "about 40"


def test_every_script_has_its_table_and_short_functions() -> None:
    untabled = [p.name for p in SCRIPTS.glob("*.sh") if p not in _tabled()]
    assert untabled == [], "scripts without an # Exits: or # Returns: table"
    long = {
        f"{p.name}: {name}": len(body)
        for p in SCRIPTS.glob("*.sh")
        for name, body in bodies(p.read_text().splitlines()).items()
        if len(body) > LONGEST
    }
    assert long == {}, f"functions over {LONGEST} lines"


GOOD = """#!/bin/sh
# Prints (stdout, one line each):
#   thing.seen PATH     PATH is there
#                       (read once)
#   (nothing)           when no PATH is given
# Exits:
#   0  done
#   3  PATH is a directory
# Returns:
#   look 1  PATH is not there
say() { echo "$1"; }
look() {
    [ -e "$1" ] || return 1
    printf 'thing.seen %s\\n' "$1"
}
[ -d "$1" ] && exit 3 # a comment: exit 9
look "$1"
"""


def test_a_table_that_agrees_with_its_code_passes() -> None:
    assert table(GOOD) == Table(["thing.seen", "(nothing)"], ["0", "3"], [("look", "1")], True)
    assert problems(GOOD) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("exit 3", "exit 4"), "`exit 4` is in no table"),
        (("#   3  PATH", "#   5  PATH"), "exit code 5 of the table is nowhere in the code"),
        (("return 1", "return 2"), "`return 2` is in no table"),
        (("#   look 1", "#   peek 1"), "`peek` of the Returns table is no function of the script"),
        (("'thing.seen", "'thing.found"), "`thing.seen` of the Prints table is printed nowhere"),
    ],
)
def test_a_table_that_disagrees_with_its_code_is_named(
    change: tuple[str, str], problem: str
) -> None:
    assert problem in problems(GOOD.replace(*change))


def test_a_script_without_a_table_of_codes_is_skipped() -> None:
    assert problems("#!/bin/sh\n# Says hello.\nexit 9\n") == []


def test_a_line_built_in_a_variable_or_after_a_format_counts_as_printed() -> None:
    assert printed("work.busy", 'w_out="${w_out}work.busy ssh $p"')
    assert printed("work.age", 'printf \'%swork.age %s\\n\' "$w_out" "$w_age"')
    assert printed("spool.files", 'echo "spool.files$enc_f"')
    assert not printed("spool", 'echo "spool.files$enc_f"')
    assert not printed("work.age", "# work.age is printed last")
