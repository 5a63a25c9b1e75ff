"""A probe section as one record: the arguments it takes, the lines it runs, how it reads them.

The probe (podstate.facts.probe) is the sections of one registry (podstate.facts.sections)
run as one sh program; each section module defines its ``Section`` beside its lines and its
parser. Everything the probe does for a section is read from its record: ``PodProbe``'s
signature (``taking``), ``Request.arguments()`` (``requested``), the program (``lines``)
and the parse (``parse``). These functions take the registry as an argument, so a registry
with one more section (a test's) is run and read the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

REQUIRED = inspect.Parameter.empty  # an argument's default where the probe must be given it
F = TypeVar("F", bound=Callable[..., Any])
Arguments = Mapping[str, Any]  # every argument of the probe, by name (``bind``)
Lines = Callable[[Arguments], Sequence[str]]


def _same(value: Any) -> Any:
    """Return ``value``: a ``Request`` field that is the probe's argument as it is."""
    return value


def _no_lines(arguments: Arguments) -> Sequence[str]:
    """Return no lines: a section that runs nothing at that point."""
    return ()


@dataclass(frozen=True)
class Argument:
    """One keyword argument of the probe (``PodProbe``'s, ``program``'s)."""

    name: str  # the argument's name, and that of the ``Request`` field that makes it
    default: Any = None  # its value where it is not given; REQUIRED: it must be given
    # how ``Request.arguments()`` makes it from the field; None: no field, given apart
    sent: Callable[[Any], Any] | None = _same


@dataclass
class Answer:
    """The probe's answer, as each section's parser reads it: its lines by key (the first
    word up to a dot: ``venv.kind`` is venv's), and the ``Probe`` fields the sections before
    have parsed (``found``: the files section reads the mounts')."""

    keyed: dict[str, list[str]]
    found: dict[str, Any] = field(default_factory=dict)

    def __contains__(self, key: str) -> bool:
        """Return whether the answer has any line of ``key``: was the section read."""
        return key in self.keyed

    def lines(self, key: str) -> list[str]:
        """Return the lines of ``key``, in order; none when the section printed none."""
        return self.keyed.get(key, [])

    def value(self, key: str) -> str | None:
        """Return the value (after the first word) of the last ``key`` line; None: none."""
        found = self.keyed.get(key)
        return found[-1].partition(" ")[2] if found else None


@dataclass(frozen=True)
class Section:
    """A probe section: what it takes, the lines it runs, the ``Probe`` fields it answers."""

    name: str  # what the section is called (its module's name, where it has one)
    fields: tuple[str, ...]  # the ``Probe`` fields it answers, in ``Probe``'s order
    parse: Callable[[Answer], Mapping[str, Any]]  # the answer's lines -> those fields
    lines: Lines = _no_lines  # its lines, from the probe's arguments, in registry order
    arguments: tuple[Argument, ...] = ()  # the probe's arguments it takes
    start: Lines = _no_lines  # lines run before every section's ``lines``
    end: Lines = _no_lines  # lines run after every section's ``lines``


def arguments(sections: Sequence[Section]) -> list[Argument]:
    """Return the probe's arguments, each section's in registry order: what it takes."""
    return [argument for section in sections for argument in section.arguments]


def requested(sections: Sequence[Section]) -> dict[str, Callable[[Any], Any]]:
    """Return the arguments that ``Request``'s fields make, by name in order (its fields'
    order), each with how its field becomes it (``Argument.sent``)."""
    return {a.name: a.sent for a in arguments(sections) if a.sent is not None}


def fields(sections: Sequence[Section]) -> list[str]:
    """Return the ``Probe`` fields the sections answer, in order (``Probe``'s order)."""
    return [name for section in sections for name in section.fields]


def bind(sections: Sequence[Section], given: Arguments) -> dict[str, Any]:
    """Return every argument of ``sections``: as ``given``, else its default. TypeError, as
    a call would raise, for an argument no section takes or a required one not given."""
    taken = {argument.name: argument for argument in arguments(sections)}
    for name in given:
        if name not in taken:
            raise TypeError(f"the probe takes no argument {name!r}")
    bound = {}
    for name, argument in taken.items():
        if name not in given and argument.default is REQUIRED:
            raise TypeError(f"the probe's argument {name!r} is missing")
        bound[name] = given[name] if name in given else argument.default
    return bound


def signature(sections: Sequence[Section]) -> inspect.Signature:
    """Return the signature of a fact's ``command(self, ...)`` that takes the sections'
    arguments, by name: those without a default first, each other with its default."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(a.name, kind, default=a.default) for a in arguments(sections)]
    parameters.sort(key=lambda parameter: parameter.default is not REQUIRED)
    return inspect.Signature([inspect.Parameter("self", kind), *parameters])


def taking(sections: Sequence[Section]) -> Callable[[F], F]:
    """Return a decorator that gives a fact's ``command(self, **arguments)`` the signature of
    the sections' arguments (``signature``). pyinfra binds a fact's arguments by its
    command's signature (``inspect``): it names each argument, with its default, in the
    fact's messages, refuses one no section takes, and checks that none is one of its own
    global arguments (``_sudo``, ``name``)."""

    def decorate(command: F) -> F:
        vars(command)["__signature__"] = signature(sections)
        return command

    return decorate


def lines(sections: Sequence[Section], given: Arguments) -> list[str]:
    """Return the sections' lines for the probe's arguments ``given`` (``bind``): each
    section's ``start``, then each one's ``lines``, then each one's ``end``."""
    bound = bind(sections, given)
    start = [line for section in sections for line in section.start(bound)]
    own = [line for section in sections for line in section.lines(bound)]
    end = [line for section in sections for line in section.end(bound)]
    return [*start, *own, *end]


def parse(sections: Sequence[Section], output: Sequence[str]) -> dict[str, Any]:
    """Return the ``Probe`` fields the sections read from the probe's ``output`` lines (its
    values put back, podstate.facts.spool), each section parsing in registry order."""
    answer = Answer({})
    for line in output:
        answer.keyed.setdefault(line.partition(" ")[0].partition(".")[0], []).append(line)
    for section in sections:
        answer.found.update(section.parse(answer))
    return answer.found
