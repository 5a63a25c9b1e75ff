"""podstate's operations as data: each case in tests/operations/ gives an operation's
arguments and what the probe read, and says what the operation yields and reports.

A case is planned with no connection: the operation's generator (``_inner``, as pyinfra's
own operation tests run theirs) runs against a pod of a real pyinfra State that is never
connected, and what it yields is compared with the case. tests/operations/README.md says
what a case file holds.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import importlib
import inspect
import io
import json
import logging
import shlex
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api.command import FileUploadCommand, FunctionCommand
from pyinfra.api.host import Host
from pyinfra.api.inventory import Inventory
from pyinfra.api.state import State
from pyinfra.context import ctx_host, ctx_state

from podstate.operations import venv
from podstate.run import findings, lock
from podstate.shell import script

CASES = Path(__file__).resolve().parent / "operations"
SCRIPTS = Path(__file__).resolve().parent.parent / "podstate" / "scripts"
# The modules whose @operation functions the cases cover: a folder is ``module.operation``.
MODULES = {
    name: f"podstate.operations.{name}"
    for name in ("apt", "boot", "records", "removal", "repos", "secrets", "upload", "venv")
} | {"bookkeeping": "podstate.run.bookkeeping"}


def _placeholders() -> list[tuple[str, str]]:
    """Return what a case writes in place of long or random text in a command, longest
    first: each of podstate's scripts as ``«name.sh»`` (as it travels, quoted in a word or
    not), the run's lock token and owner, and the venv scripts' supervisor."""
    texts = {f"«{p.name}»": script(p.name) for p in SCRIPTS.glob("*.sh")}
    texts |= {"«venv supervisor»": venv._SUPERVISOR, "«TOKEN»": lock.TOKEN, "«OWNER»": lock.OWNER}
    texts["«[0-9a-f]×12»"] = "[0-9a-f]" * 12
    pairs = {(text.replace("'", "'\"'\"'"), name) for name, text in texts.items()}
    pairs |= {(text, name) for name, text in texts.items()}
    return sorted(pairs, key=lambda pair: -len(pair[0]))


PLACEHOLDERS = _placeholders()


def shown(text: str) -> str:
    """Return ``text`` with the placeholders a case writes (``_placeholders``)."""
    for text_of, name in PLACEHOLDERS:
        text = text.replace(text_of, name)
    return text


def joined(text: str | list[str]) -> str:
    """Return a case's text: a string, or a list of pieces written one a line."""
    return text if isinstance(text, str) else "".join(text)


def typed(value: Any, hint: Any) -> Any:
    """Return the case's JSON ``value`` as the type ``hint`` (an argument's annotation):
    dataclasses built from objects, field by field; tuples, lists, dicts of them."""
    origin, params = typing.get_origin(hint), typing.get_args(hint)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        (hint,) = [p for p in params if p is not type(None)]
        return typed(value, hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        return hint(**{k: typed(v, hints[k]) for k, v in value.items()})
    if origin is dict:
        return {k: typed(v, params[1]) for k, v in value.items()}
    if origin is tuple:
        if len(params) == 2 and params[1] is Ellipsis:
            return tuple(typed(v, params[0]) for v in value)
        return tuple(typed(v, p) for v, p in zip(value, params, strict=True))
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable):
        return [typed(v, params[0]) for v in value]
    return value


def operation(folder: str) -> Any:
    """Return the @operation a case folder (``module.operation``) names."""
    module, name = folder.split(".")
    return getattr(importlib.import_module(MODULES[module]), name)


def arguments(op: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Return the keyword arguments a case gives ``op``: its ``args`` and ``probe``, typed."""
    args, probe = case.get("args", {}), case.get("probe", {})
    assert not set(args) & set(probe), "an argument is in args or in probe, not both"
    hints = typing.get_type_hints(op._inner)
    return {k: typed(v, hints[k]) for k, v in (args | probe).items()}


def as_data(command: Any) -> Any:
    """Return a command an operation yielded as a case writes it (tests/operations/README.md)."""
    if isinstance(command, lock.Change):
        inner = shown(command.inner)
        if command.ttl is None and not command.later:
            return inner
        return (
            {"change": inner}
            | ({"ttl": command.ttl} if command.ttl else {})
            | ({"later": True} if command.later else {})
        )
    if isinstance(command, FileUploadCommand):
        if isinstance(command.src, io.BytesIO):
            return {"upload": command.dest, "content": command.src.getvalue().decode()}
        return {"upload": command.dest, "from": command.src}
    if isinstance(command, FunctionCommand):
        runs = [shown(a.inner) for a in command.args if isinstance(a, lock.Change)]
        return {"callback": command.function.__name__} | ({"runs": runs[0]} if runs else {})
    return {"unlocked": shown(str(command))}


TEXTS = ("change", "unlocked", "runs")  # the keys of a command's shell, in pieces or not


def wanted(command: Any) -> Any:
    """Return an expected command of a case with its pieces joined (``joined``)."""
    if isinstance(command, dict):
        return {k: joined(v) if k in TEXTS else v for k, v in command.items()}
    return joined(command)


class Noted(logging.Handler):
    """What pyinfra logs of a pod's noop (``host.noop``): its description, last one kept."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.noop: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        _, mark, description = record.getMessage().partition("noop: ")
        if mark:
            self.noop = description


def plan(
    host: Host, place: int, op: Any, kwargs: dict[str, Any], sets: dict[str, Any]
) -> list[Any]:
    """Return what ``op`` yields for ``kwargs`` on ``host``, as the operation at ``place`` in
    a run (its ``current_op_hash``, under which podstate keeps what it reports). A callback
    it yields is not run: the last dict it is given, for its outcome, gets ``sets``, as the
    callback would have set it, before the generator goes on."""
    host.current_op_hash = f"{place}:{op.__module__}.{op.__name__}"
    out = []
    commands: Iterator[Any] = op._inner(**kwargs)
    for command in commands:
        out.append(command)
        if isinstance(command, FunctionCommand):
            outcome = [given for given in command.args if isinstance(given, dict)]
            if outcome:
                outcome[-1].update(sets)
    return out


def new_pod(name: str) -> tuple[State, Host]:
    """Return a run's State with one pod, ``name``, which is never connected, and the pod:
    each case plans on a pod of its own, so nothing one case planned is seen by another."""
    inventory = typing.cast(Any, Inventory)(([name], {}))  # pyinfra's Inventory is untyped
    state = State(inventory)
    (host,) = inventory
    return state, host


def run_case(folder: str, case: dict[str, Any]) -> dict[str, Any]:
    """Return what the case's operation yields and reports on a pod of its own, after the
    case's ``before`` operations on the same pod in the same run."""
    state, host = new_pod(f"{folder}/{case['name']}")
    noted, logger = Noted(), logging.getLogger("pyinfra")
    logger.addHandler(noted)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # noop descriptions are logged at debug level
    try:
        with ctx_state.use(state), ctx_host.use(host):
            before = case.get("before", [])
            for place, earlier in enumerate(before):
                op = operation(earlier["operation"])
                plan(host, place, op, arguments(op, earlier), {})
            violations = len(findings.of(host).violations)
            noted.noop = None
            op = operation(folder)
            sets = case.get("callback_sets", {})
            commands = plan(host, len(before), op, arguments(op, case), sets)
    finally:
        logger.removeHandler(noted)
        logger.setLevel(level)
    found, op_hash = findings.of(host), host.current_op_hash or ""
    return {
        "commands": [as_data(c) for c in commands],
        "noop": noted.noop,
        "change": found.labels.get(op_hash),
        "violations": [[v.finding, v.message] for v in found.violations[violations:]],
        "diff": found.diffs.get(op_hash),
        "secret": op_hash in found.secret,
    }


# What a case file may hold (tests/operations/README.md): what goes in, then what comes out.
FIELDS = {"args", "probe", "before", "callback_sets"}
FIELDS |= {"commands", "noop", "change", "violations", "diff", "secret"}


def load(path: Path) -> dict[str, Any]:
    """Return the case in ``path``, named by its file; a field the harness does not read (a
    typo) fails it, so no case states what is never compared."""
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert set(case) <= FIELDS, f"unknown fields: {sorted(set(case) - FIELDS)}"
    return case | {"name": path.stem}


CASE_FILES = sorted(CASES.glob("*/*.json"))


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_operation_case(path: Path) -> None:
    case = load(path)
    got = run_case(path.parent.name, case)
    expected = {
        "commands": [wanted(c) for c in case["commands"]],
        "noop": case.get("noop"),
        "change": case.get("change"),
        "violations": case.get("violations", []),
        "diff": joined(case["diff"]) if "diff" in case else None,
        "secret": case.get("secret", False),
    }
    assert got == expected, json.dumps(got, indent=2, ensure_ascii=False)


def test_every_operation_has_cases() -> None:
    """Each @operation of the modules in MODULES has a folder of cases, and each folder
    names one of them."""
    folders = {p.name for p in CASES.iterdir() if p.is_dir()}
    ops = {
        f"{module}.{name}"
        for module, path in MODULES.items()
        for name, value in inspect.getmembers(importlib.import_module(path))
        if hasattr(value, "_inner") and value.__module__ == path
    }
    assert ops == folders
    assert all(any((CASES / f).glob("*.json")) for f in folders)


def test_a_scripts_placeholder_stands_for_that_script_alone() -> None:
    """A case's ``«name.sh»`` is exactly that script, quoted as a word or not: no script's
    text is taken for another's, or left half replaced."""
    for path in SCRIPTS.glob("*.sh"):
        text = script(path.name)
        assert shown(text) == f"«{path.name}»"
        assert shown(f"sh -c {shlex.quote(text)} x") == f"sh -c '«{path.name}»' x"
