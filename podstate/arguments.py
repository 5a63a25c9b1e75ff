"""The ``podstate`` command's options and help; a usage error exits 1, as every error does.

argparse exits 2 on a usage error, the status a check gives drift: a typo in a CI job
would read as "drift". Here exit 2 is only ever for pods an apply would change.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from typing import NoReturn

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


def _number(kind: type, least: float, above: bool = False):
    """Return an argparse type: a ``kind`` (int or float) at least ``least`` (with ``above``,
    more than it), refused with one line naming what it must be."""
    name = {int: "a whole number", float: "a number"}[kind]
    bound = f"above {least:g}" if above else f"at least {least:g}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {name}") from None
        if value < least or (above and value == least):
            raise argparse.ArgumentTypeError(f"{text} must be {bound}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its message
    return parse


class _Help(argparse.HelpFormatter):
    """Help that names each option's default, where it has one (not for flags)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def _version() -> str:
    """Return podstate's version and pyinfra's, as ``podstate --version`` prints them."""
    return f"podstate {metadata.version('podstate')} (pyinfra {metadata.version('pyinfra')})"


def _command(commands, name: str, summary: str, exits: str, **more) -> Parser:
    """Add a subcommand whose help says what it does (``summary``), and its exit statuses."""
    return commands.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog=exits,
        formatter_class=_Help,
        **more,
    )


def _fleet_arguments(command: argparse.ArgumentParser, verb: str | None) -> None:
    """Add the options that choose the pods and deploy files and how they are reached:
    --inventory, --deploy (none without a ``verb``: what is done to them), --limit,
    --strict-host-keys."""
    command.add_argument(
        "--inventory",
        default="inventories/pods.py",
        metavar="FILE",
        help="the pyinfra inventory file that lists the pods",
    )
    if verb:
        command.add_argument(
            "--deploy",
            action="append",
            metavar="FILE",
            help=f"a deploy file to {verb} (repeatable; default: every deploy/*.py, in name order)",
        )
    command.add_argument(
        "--limit",
        action="append",
        metavar="PATTERN",
        help="a group's name, or else a glob of pod names (quoted), as pyinfra's --limit: "
        "repeatable, and a comma is part of the pattern",
    )
    command.add_argument(
        "--strict-host-keys",
        action="store_true",
        help="refuse a new host key that RunPod's log does not verify, instead of trusting it",
    )


def _connect_timeout(command: argparse.ArgumentParser) -> None:
    """Add --timeout: how long connecting to a pod may take."""
    command.add_argument(
        "--timeout",
        type=_number(int, 1),
        default=settings.CONNECT_TIMEOUT,
        metavar="SECONDS",
        help="how long connecting to a pod may take (default: PODSTATE_CONNECT_TIMEOUT, or 10)",
    )


def _report_arguments(command: argparse.ArgumentParser) -> None:
    """Add the report options of check and report merge: --junit, --markdown, --diff."""
    command.add_argument(
        "--junit", metavar="PATH", help="write a JUnit XML report here (-: stdout)"
    )
    command.add_argument(
        "--markdown",
        metavar="PATH",
        help="write a compact Markdown report here, for a CI job summary or a pull request "
        "comment (-: stdout)",
    )
    command.add_argument(
        "--diff", action="store_true", help="show unified diffs of managed files in the table"
    )


def _check(commands) -> None:
    drift = _command(commands, "check", "report drift without changing any pod", CHECK_EXITS)
    _fleet_arguments(drift, "plan")
    drift.add_argument(
        "--json", metavar="PATH", help="write the JSON report here (-: stdout, the table to stderr)"
    )
    _report_arguments(drift)
    _connect_timeout(drift)
    drift.add_argument(
        "--shard",
        metavar="K/N",
        help="check only shard K of N: the pods whose name hashes to it (a CI matrix job)",
    )
    drift.add_argument(
        "--watch-state",
        metavar="PATH",
        help="read podstate watch's state file to say how long each idle pod has been idle "
        "and what it cost since",
    )
    drift.set_defaults(command="check")


def _uninstall(commands) -> None:
    gone = _command(
        commands,
        "uninstall",
        "remove everything podstate put on the pods, as the records on them say",
        "exit status: 0 nothing of podstate's is left on any pod; 1 a violation (a venv or "
        "tmpfs still in use, a tmpfs with files in it, a record podstate cannot use), an "
        "unreachable pod, an error, or a usage error; 2 something is left (with --dry-run: 2 "
        "something would be removed, 0 nothing would)",
    )
    _fleet_arguments(gone, None)
    gone.add_argument(
        "--dry-run", action="store_true", help="list what would be removed; change nothing"
    )
    gone.add_argument(
        "--volume",
        default="/workspace",
        metavar="PATH",
        help="the volume whose record is read, as boot.volume said (default: /workspace)",
    )
    gone.add_argument(
        "--packages",
        action="store_true",
        help="remove the apt packages podstate installed too (default: they are left, named)",
    )
    gone.add_argument(
        "--keep-venv",
        action="store_true",
        help="leave the venv podstate built, and its snapshots on the volume",
    )
    gone.add_argument(
        "--discard-scratch",
        action="store_true",
        help="unmount the tmpfs scratch podstate mounted even when files are in it, which go "
        "with it (default: such a tmpfs stays mounted, named)",
    )
    gone.add_argument(
        "--diff", action="store_true", help="show unified diffs of the files in the table"
    )
    _connect_timeout(gone)
    gone.set_defaults(command="uninstall")


def _wait(commands) -> None:
    waiting = _command(
        commands,
        "wait",
        "wait until every selected pod is ready for the current desired state",
        "exit status: 0 every pod ready; 1 some pod not ready at the timeout, or an error",
    )
    _fleet_arguments(waiting, "plan")
    waiting.add_argument(
        "--timeout",
        type=_number(int, 0),
        default=600,
        metavar="SECONDS",
        help="how long to wait; 0 checks once",
    )
    waiting.add_argument(
        "--interval",
        type=_number(int, 0, above=True),
        default=5,
        metavar="SECONDS",
        help="the time between two checks",
    )
    waiting.set_defaults(command="wait")


def _report(commands) -> None:
    report = _command(commands, "report", "work on check reports", EXITS)
    actions = report.add_subparsers(dest="action", required=True, metavar="ACTION")
    merging = _command(
        actions,
        "merge",
        "merge shard reports (check --json) into one report",
        CHECK_EXITS.replace("an error,", "an error, a shard report missing or unreadable,"),
    )
    merging.add_argument(
        "out", metavar="OUT.json", help="the merged JSON report to write (-: stdout)"
    )
    merging.add_argument("reports", metavar="IN.json", nargs="+", help="the shards' reports")
    _report_arguments(merging)
    merging.set_defaults(command="merge")


def _inventory(commands) -> None:
    listing = _command(
        commands,
        "inventory",
        "list the pods to manage (pods file or RunPod API), and the skipped ones",
        "exit status: 0 listed; 1 an error (the inventory cannot be read)",
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.add_argument("--shard", metavar="K/N", help="only the pods of shard K of N")
    listing.add_argument(
        "--names",
        action="store_true",
        help="print only the names, one a line (for pyinfra --limit NAME ...)",
    )
    listing.set_defaults(command="inventory")


def _watch(commands) -> None:
    looping = _command(
        commands,
        "watch",
        "put new, restarted, moved and drifted pods back, in a loop (or --once)",
        "exit status: 0 stopped by SIGTERM or SIGINT; with --once the fleet's after the pass "
        "(0 ok, 2 drift left, 1 worse); 1 an error before the first pass",
    )
    looping.add_argument(
        "--deploy",
        action="append",
        metavar="FILE",
        help="a deploy file to apply (repeatable; default: every deploy/*.py, in name order)",
    )
    looping.add_argument(
        "--interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds from one pass to the next",
    )
    looping.add_argument(
        "--check-every",
        type=int,
        default=10,
        metavar="N",
        help="a drift check of the whole fleet every N passes, the first included",
    )
    looping.add_argument(
        "--max-backoff",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="the longest wait before a failing pod is tried again",
    )
    looping.add_argument(
        "--exclude",
        action="append",
        metavar="POD",
        help="hold this pod (name or glob; repeatable): checked and logged, never changed",
    )
    looping.add_argument(
        "--state",
        metavar="PATH",
        help="where the watch keeps since when each pod is idle "
        "(default: ~/.cache/podstate/watch-state.json)",
    )
    looping.add_argument(
        "--dry-run",
        action="store_true",
        help="log the idle pods it would stop, stop none",
    )
    looping.add_argument("--json", action="store_true", help="one JSON object per event line")
    looping.add_argument(
        "--once",
        action="store_true",
        help="one pass with a check, then exit with the fleet's status",
    )
    looping.add_argument("--passes", type=int, help=argparse.SUPPRESS)  # tests: stop after N
    looping.set_defaults(command="watch")


def _sandbox(commands) -> None:
    box = _command(
        commands,
        "sandbox",
        "local sandbox pods: real sshd, RunPod-shaped",
        "exit status: 0 done; 1 an error",
    )
    box.add_argument(
        "action",
        choices=["up", "down", "status", "restart", "api"],
        help="restart POD: restart a pod as RunPod does (container disk wiped, volume kept, "
        "new host key); api: print the shell lines that point podstate at the sandbox's "
        "RunPod API",
    )
    box.add_argument("pod", nargs="?", help="the pod to restart (restart)")
    box.add_argument("--pods", type=_number(int, 1), default=4, help="how many pods (up)")
    box.add_argument(
        "--vast", type=_number(int, 0), default=0, metavar="N",
        help="how many Vast.ai instances besides the pods (up; listed by the sandbox's Vast API)",
    )  # fmt: skip
    box.add_argument(
        "--nvidia-smi-delay", type=_number(float, 0), default=0, metavar="SECONDS",
        help="how long each call of the pods' nvidia-smi takes (up; real multi-GPU hosts "
        "without persistence mode take seconds)",
    )  # fmt: skip
    box.set_defaults(command="sandbox")


def parser() -> Parser:
    """Return the argument parser of every subcommand; ``command`` names the one given (None
    for a bare ``podstate``)."""
    top = Parser(
        prog="podstate",
        description="The drift check, waiting for ready pods, the watch loop and the sandbox: "
        "what pyinfra's own CLI does not cover (pyinfra applies).",
        epilog=EXITS,
    )
    top.add_argument("--version", action="version", version=_version())
    top.set_defaults(command=None)
    commands = top.add_subparsers(metavar="COMMAND", parser_class=Parser)
    for add in (_check, _wait, _uninstall, _report, _inventory, _watch, _sandbox):
        add(commands)
    return top
