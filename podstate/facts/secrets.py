"""The probe's secrets section: whether the secrets file, and each value it sets, is the
wanted one.

The probe gets the wanted values on its stdin (``probe_stdin``), never on its command line,
and its ``secrets.*`` lines (scripts/secrets_state.sh) say only ``same`` or ``differs`` per
name: no digest, so nothing in pyinfra's output at any verbosity lets a guess at a value be
tested.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from podstate.desired.secret import Secret, render
from podstate.facts.section import Argument, Section
from podstate.paths import SECRETS_FILE
from podstate.shell import b64, script

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SecretsState:
    """What the probe read of the secrets file, compared with the wanted one on the pod."""

    state: str  # "file" | "absent" | what else is there
    owner: int | None  # its owner's uid (a file only)
    mode: str | None  # its mode, e.g. "600" (a file only)
    same: bool  # the file is byte for byte the wanted one
    # for each name the file sets, whether its value is the wanted one (read only from a file
    # of root with mode 600: podstate reads no other)
    values: dict[str, bool]
    # the copies of it an upload left beside it (``SECRETS_FILE`` with ``.podstate-upload``
    # or ``.podstate-check``: a run was killed before it installed them)
    leftovers: tuple[str, ...]


class Hidden(list[str]):
    """Lines for a command's stdin, shown as ``(hidden)``: pyinfra prints a fact's keyword
    arguments, ``_stdin`` among them, in its "Loaded fact" line."""

    def __repr__(self) -> str:
        return "(hidden)"

    __str__ = __repr__


def probe_lines(names: list[str]) -> list[str]:
    """Return the probe lines that compare the secrets file, and each of ``names`` it sets,
    with the wanted ones on the probe's stdin (see scripts/secrets_state.sh).

    The file is sourced in a subshell of its own for each name, so no variable of the probe
    (nor the value of another name) can hide one; a name is written into the code itself,
    so it must be a variable name (ValueError, else: the schema allows no other).
    """
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a variable name: {name!r}")
    f = shlex.quote(SECRETS_FILE)
    read = f"unset {{0}}; . {f} >/dev/null 2>&1 </dev/null; "
    read += '[ -z "${{{0}+x}}" ] || {{ printf x; printf %s "${0}" | b64; }}'
    calls = "".join(f'secrets_value {n} "$({read.format(n)})"; ' for n in names)
    return [script("secrets_state.sh"), f"{{ if secrets_file {f}; then {calls}:; fi; }} <&3"]


def probe_stdin(values: dict[str, Secret]) -> Hidden:
    """Return the probe's stdin for ``values``: the whole wanted file, then each value in
    name order (the order of ``probe_lines``' names), each one line of base64."""
    return Hidden([b64(render(values)), *(b64(values[name].value) for name in sorted(values))])


def parse(output: list[str]) -> SecretsState:
    """Return the probe's :class:`SecretsState` from its ``secrets.*`` lines."""
    words: list[str] = ["absent"]
    values: dict[str, bool] = {}
    leftovers: list[str] = []
    for line in output:
        key, _, rest = line.partition(" ")
        if key == "secrets.file":
            words = rest.split(" ")
        elif key == "secrets.value":
            name, _, answer = rest.partition(" ")
            values[name] = answer == "same"
        elif key == "secrets.leftover" and rest in ("podstate-upload", "podstate-check"):
            leftovers.append(f"{SECRETS_FILE}.{rest}")
    if len(words) == 3:
        return SecretsState(
            state="file",
            owner=int(words[0]),
            mode=words[1],
            same=words[2] == "same",
            values=values,
            leftovers=tuple(leftovers),
        )
    return SecretsState(
        state=words[0], owner=None, mode=None, same=False, values={}, leftovers=tuple(leftovers)
    )


SECTION = Section(
    "secrets",
    fields=("secrets",),
    parse=lambda answer: {
        "secrets": parse(answer.lines("secrets")) if "secrets" in answer else None
    },
    lines=lambda arguments: (
        () if arguments["secrets"] is None else probe_lines(arguments["secrets"])
    ),
    # only the names travel in the program; the values come on its stdin (``probe_stdin``)
    arguments=(
        Argument("secrets", sent=lambda values: None if values is None else sorted(values)),
    ),
)
