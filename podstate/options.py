"""The shapes of the ``podstate`` command's options: a parser whose usage errors exit 1,
help that names defaults, numbers with a bound, an option and a subcommand as records
(``Option``, ``Command``), and the options several subcommands take, defined once (the
inventory, the deploy files, the pods, the host keys, the connect timeout, JSON, the
reports). The table of subcommands that uses them is ``podstate.arguments``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from podstate import settings

EXITS = "exit status: 0 ok; 2 only for pods an apply would change; 1 any error, a usage one too"
CHECK_EXITS = (
    "exit status: 0 every pod ok; 2 drift or restarts (what an apply would change), nothing "
    "worse; 1 a violation, an unreachable pod, an error, or a usage error"
)


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit 1 (argparse's own exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def number(kind: type, least: float, above: bool = False) -> Callable[[str], Any]:
    """Return an argparse type: a ``kind`` (int or float) at least ``least`` (with ``above``,
    more than it), refused with one line naming what it must be."""
    name = {int: "a whole number", float: "a number"}[kind]
    bound = f"above {least:g}" if above else f"at least {least:g}"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {name}") from None
        if value < least or (above and value == least):
            raise argparse.ArgumentTypeError(f"{text} must be {bound}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its message
    return parse


class Help(argparse.HelpFormatter):
    """Help that names each option's default, where it has one (not for flags)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


class Version(argparse._VersionAction):
    """``--version``: podstate's version and pyinfra's, looked up only when it is asked
    for (a lookup reads the installed packages' metadata, which no other command needs)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from importlib import metadata

        self.version = (
            f"podstate {metadata.version('podstate')} (pyinfra {metadata.version('pyinfra')})"
        )
        super().__call__(parser, *args, **kwargs)


@dataclass(frozen=True)
class Option:
    """One option (or positional argument) of a subcommand: its flags (or name), and what
    argparse's ``add_argument`` takes besides."""

    flags: tuple[str, ...]
    kwargs: dict[str, Any]

    def add(self, parser: argparse.ArgumentParser) -> None:
        """Add the option to ``parser``; return nothing."""
        parser.add_argument(*self.flags, **self.kwargs)


def option(*flags: str, **kwargs: Any) -> Option:
    """Return an Option: ``add_argument``'s arguments, kept for a subcommand's parser."""
    return Option(flags, kwargs)


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, what it does (the help's one line and, as a sentence, its
    description), its exit statuses (the help's epilog), its options in the help's order,
    and its handler (``module:function``, called with the parsed arguments, returning the
    exit status); or, for a group such as ``report``, its own subcommands."""

    name: str
    summary: str
    exits: str
    options: tuple[Option, ...] = ()
    handler: str | None = None
    actions: tuple[Command, ...] = ()


# --- the options several subcommands take, defined once ------------------------------------


def fleet(verb: str | None) -> tuple[Option, ...]:
    """Return the options that choose the pods and deploy files and how they are reached:
    --inventory, --deploy (none without a ``verb``: what is done to them), --limit,
    --strict-host-keys."""
    return (
        option(
            "--inventory",
            default="inventories/pods.py",
            metavar="FILE",
            help="the pyinfra inventory file that lists the pods",
        ),
        *([deploy(verb)] if verb else []),
        option(
            "--limit",
            action="append",
            metavar="PATTERN",
            help="a group's name, or else a glob of pod names (quoted), as pyinfra's --limit: "
            "repeatable, and a comma is part of the pattern",
        ),
        option(
            "--strict-host-keys",
            action="store_true",
            help="refuse a new host key that RunPod's log does not verify, instead of trusting it",
        ),
    )


def deploy(verb: str) -> Option:
    """Return --deploy: the deploy files to ``verb`` (plan, apply)."""
    return option(
        "--deploy",
        action="append",
        metavar="FILE",
        help=f"a deploy file to {verb} (repeatable; default: every deploy/*.py, in name order)",
    )


def connect_timeout() -> Option:
    """Return --timeout: how long connecting to a pod may take (its default read now, from
    the environment's ``PODSTATE_CONNECT_TIMEOUT``)."""
    return option(
        "--timeout",
        type=number(int, 1),
        default=settings.CONNECT_TIMEOUT,
        metavar="SECONDS",
        help="how long connecting to a pod may take (default: PODSTATE_CONNECT_TIMEOUT, or 10)",
    )


def json_flag(help: str) -> Option:
    """Return --json as a flag: JSON instead of the text ``help`` names."""
    return option("--json", action="store_true", help=help)


def diff(what: str) -> Option:
    """Return --diff: unified diffs of ``what`` in the table."""
    return option("--diff", action="store_true", help=f"show unified diffs of {what} in the table")


def reports() -> tuple[Option, ...]:
    """Return the report options of check and report merge: --junit, --markdown, --html,
    --diff."""
    return (
        option("--junit", metavar="PATH", help="write a JUnit XML report here (-: stdout)"),
        option(
            "--markdown",
            metavar="PATH",
            help="write a compact Markdown report here, for a CI job summary or a pull "
            "request comment (-: stdout)",
        ),
        option(
            "--html",
            metavar="PATH",
            help="write the fleet at a glance as one self-contained HTML page here (-: stdout)",
        ),
        diff("managed files"),
    )
