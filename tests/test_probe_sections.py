"""The probe's sections are one registry (podstate.facts.sections): ``PodProbe``'s signature,
``Request``'s fields and arguments, the program and ``Probe``'s fields all follow it, and a
section defined here alone, added to it, is run and read without any other edit."""

from __future__ import annotations

import inspect
import shlex
import subprocess
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from pyinfra.api import FactBase

from podstate.facts import probe, section, spool
from podstate.facts.decode import by_key, decode
from podstate.facts.probe import PodProbe, Probe, parse_probe
from podstate.facts.request import Request
from podstate.facts.section import Answer, Argument, Section
from podstate.facts.sections import SECTIONS


@dataclass(frozen=True)
class Toy:
    """The toy section's result: what a directory holds."""

    entries: int  # how many entries it has
    note: str | None  # its file ``note``, sent through the probe's spool; None: none


def _toy_lines(arguments: section.Arguments) -> list[str]:
    """Return the toy section's lines: nothing unless asked for a directory."""
    where = arguments["toy"]
    if where is None:
        return []
    d = shlex.quote(where)
    return [
        f'n=0; for x in {d}/* {d}/.[!.]*; do if [ -e "$x" ]; then n=$((n + 1)); fi; done',
        'echo "toy.entries $n"',
        f'if [ -f {d}/note ]; then enc "$(cat {d}/note)"; echo "toy.note $enc_v"; fi',
    ]


def _toy(answer: Answer) -> dict[str, Toy | None]:
    """Return the toy section's field: None where it was not asked for."""
    if "toy" not in answer:
        return {"toy": None}
    read = by_key(answer.lines("toy"))
    note = decode(read["note"]) if "note" in read else None
    return {"toy": Toy(entries=int(read["entries"]), note=note)}


TOY = Section("toy", fields=("toy",), parse=_toy, lines=_toy_lines, arguments=(Argument("toy"),))
REGISTRY = (*SECTIONS, TOY)


def _run(registry: tuple[Section, ...], shell: list[str], **arguments: object) -> list[str]:
    """Return the output lines, between ``begin`` and ``end``, of the probe of ``registry``
    for ``arguments``, run by ``shell`` as a pod runs it (``READER``, program on stdin)."""
    text = probe.program_of(registry, {"paths": [], "files": [], **arguments})
    done = subprocess.run(
        [*shell, "-c", probe.READER],
        input="".join(f"{line}\n" for line in probe.sourced(text)),
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[-1] == "end", done.stderr
    return lines[len(lines) - lines[::-1].index("begin") : -1]


def test_probe_has_the_fields_of_the_sections_in_their_order():
    assert [f.name for f in fields(Probe)] == section.fields(SECTIONS)


def test_request_has_a_field_for_each_argument_the_sections_take_in_their_order():
    named = [argument.name for argument in section.arguments(SECTIONS)]
    assert [f.name for f in fields(Request)] == list(section.requested(SECTIONS))
    assert len(set(named)) == len(named)
    assert set(named) - set(section.requested(SECTIONS)) == {"lock_wait"}  # the run's own
    assert list(Request().arguments()) == list(section.requested(SECTIONS))


def test_each_section_answers_its_own_fields_whatever_it_read():
    lines = _run(SECTIONS, ["dash"], paths=["/"], files=["/etc/hostname"], free=["/"], apt=["sh"])
    for output in ([], spool.resolve(lines)):
        answer = Answer({})
        for line in output:
            answer.keyed.setdefault(line.partition(" ")[0].partition(".")[0], []).append(line)
        for each in SECTIONS:
            found = each.parse(answer)
            assert tuple(found) == each.fields, each.name
            answer.found.update(found)
    probed = parse_probe(lines)
    assert probed.paths["/"].kind == "directory" and probed.free["/"] is not None
    assert probed.apt is not None and probed.secrets is None and probed.venv is None


def test_pyinfra_binds_the_probe_by_the_sections_arguments():
    """pyinfra binds a fact's keyword arguments by its command's signature (``getcallargs``
    in pyinfra.api.facts): every section's argument, with its default, and no other."""
    command = PodProbe().command
    bound = inspect.getcallargs(command, paths=["/a"], files=[], apt=["git"])
    assert bound.pop("self") is command.__self__
    assert bound == section.bind(SECTIONS, {"paths": ["/a"], "files": [], "apt": ["git"]})
    assert bound["lock_wait"] == 0 and bound["secrets"] is None
    with pytest.raises(TypeError):
        inspect.getcallargs(command, paths=[], files=[], toy="/tmp")
    with pytest.raises(TypeError):
        inspect.getcallargs(command, files=[])
    assert command(**bound) == probe.READER


def test_a_section_cannot_take_an_argument_pyinfra_keeps_for_itself():
    taken = section.taking(
        (*SECTIONS, Section("n", (), lambda answer: {}, arguments=(Argument("_sudo"),)))
    )
    with pytest.raises(TypeError, match="_sudo"):

        class Clash(FactBase[str]):
            @taken
            def command(self, **arguments: object) -> str:
                return "true"


def test_the_probe_binds_its_arguments_as_a_call_would():
    assert section.bind(SECTIONS, {"paths": [], "files": []})["venv"] is None
    with pytest.raises(TypeError, match="toy"):
        section.bind(SECTIONS, {"paths": [], "files": [], "toy": "/tmp"})
    with pytest.raises(TypeError, match="files"):
        section.bind(SECTIONS, {"paths": []})
    assert section.bind(REGISTRY, {"paths": [], "files": []})["toy"] is None


@pytest.mark.parametrize("shell", [["dash"], ["bash"], ["busybox", "sh"]], ids=" ".join)
def test_a_section_added_to_the_registry_is_run_and_read(tmp_path: Path, shell: list[str]):
    """A section defined in this file alone, one more record in the registry: its lines run
    in the probe's program, its value comes back through the probe's spool, its parser
    reads it, and every other section reads as it does without it."""
    (tmp_path / "a").mkdir()
    (tmp_path / ".b").write_text("")
    (tmp_path / "note").write_text("hello, world\n\tfrom a toy")
    found = probe.answer_of(REGISTRY, _run(REGISTRY, shell, toy=str(tmp_path)))
    assert found["toy"] == Toy(entries=3, note="hello, world\n\tfrom a toy")
    assert "toy" not in section.fields(SECTIONS)
    rest = Probe(**{name: value for name, value in found.items() if name != "toy"})
    assert rest.lock is not None and rest.user and rest.paths == {}
    unasked = probe.answer_of(REGISTRY, _run(REGISTRY, shell))
    assert unasked["toy"] is None and unasked.keys() == found.keys()


def test_without_the_added_section_its_lines_are_not_in_the_program(tmp_path: Path):
    arguments = {"paths": [], "files": []}
    with_toy = probe.program_of(REGISTRY, {**arguments, "toy": str(tmp_path)})
    assert "toy.entries" in with_toy and "toy.entries" not in probe.program(**arguments)
    assert probe.program_of(REGISTRY, arguments) == probe.program(**arguments)
