"""The ``podstate`` command's subcommands in one table (``table()``): each one's name,
summary, exit statuses, options and handler, declared once, and the parser made from it.
The options several subcommands take are defined once, in ``podstate.options``. A handler
is named as ``module:function`` and imported only when its subcommand runs, so that a
command loads what it uses and no more (``podstate.cli``).

A usage error exits 1, as every error does: argparse exits 2 on one, the status a check
gives drift, and a typo in a CI job would read as "drift". Here exit 2 is only ever for
pods an apply would change.
"""

from __future__ import annotations

import argparse
from typing import Any

from podstate.options import (
    CHECK_EXITS,
    EXITS,
    Command,
    Help,
    Parser,
    Version,
    connect_timeout,
    deploy,
    diff,
    fleet,
    json_flag,
    number,
    option,
    reports,
)


def table() -> tuple[Command, ...]:
    """Return every subcommand, in the help's order: the one place each is declared (made
    when a parser is, so that a default from the environment is read then)."""
    return (
        Command(
            "check",
            "report drift without changing any pod",
            CHECK_EXITS,
            (
                *fleet("plan"),
                option(
                    "--json",
                    metavar="PATH",
                    help="write the JSON report here (-: stdout, the table to stderr)",
                ),
                *reports(),
                connect_timeout(),
                option(
                    "--shard",
                    metavar="K/N",
                    help="check only shard K of N: the pods whose name hashes to it (a CI "
                    "matrix job)",
                ),
                option(
                    "--watch-state",
                    metavar="PATH",
                    help="read podstate watch's state file to say how long each idle pod has "
                    "been idle and what it cost since",
                ),
                option(
                    "--metrics",
                    metavar="PATH",
                    help="write the fleet's Prometheus gauges to this file, for node_exporter's "
                    "textfile collector",
                ),
            ),
            "podstate.commands.check:check",
        ),
        Command(
            "wait",
            "wait until every selected pod is ready for the current desired state",
            "exit status: 0 every pod ready; 1 some pod not ready at the timeout, or an error",
            (
                *fleet("plan"),
                option(
                    "--timeout",
                    type=number(int, 0),
                    default=600,
                    metavar="SECONDS",
                    help="how long to wait; 0 checks once",
                ),
                option(
                    "--interval",
                    type=number(int, 0, above=True),
                    default=5,
                    metavar="SECONDS",
                    help="the time between two checks",
                ),
            ),
            "podstate.commands.check:wait",
        ),
        Command(
            "uninstall",
            "remove everything podstate put on the pods, as the records on them say",
            "exit status: 0 nothing of podstate's is left on any pod; 1 a violation (a venv or "
            "tmpfs still in use, a tmpfs with files in it, a record podstate cannot use), an "
            "unreachable pod, an error, or a usage error; 2 something is left (with --dry-run: "
            "2 something would be removed, 0 nothing would)",
            (
                *fleet(None),
                option(
                    "--dry-run",
                    action="store_true",
                    help="list what would be removed; change nothing",
                ),
                option(
                    "--volume",
                    default="/workspace",
                    metavar="PATH",
                    help="the volume whose record is read, as boot.volume said (default: "
                    "/workspace)",
                ),
                option(
                    "--packages",
                    action="store_true",
                    help="remove the apt packages podstate installed too (default: they are "
                    "left, named)",
                ),
                option(
                    "--keep-venv",
                    action="store_true",
                    help="leave the venv podstate built, and its snapshots on the volume",
                ),
                option(
                    "--discard-scratch",
                    action="store_true",
                    help="unmount the tmpfs scratch podstate mounted even when files are in it, "
                    "which go with it (default: such a tmpfs stays mounted, named)",
                ),
                diff("the files"),
                connect_timeout(),
            ),
            "podstate.commands.check:uninstall",
        ),
        Command(
            "report",
            "work on check reports",
            EXITS,
            actions=(
                Command(
                    "merge",
                    "merge shard reports (check --json) into one report",
                    CHECK_EXITS.replace(
                        "an error,", "an error, a shard report missing or unreadable,"
                    ),
                    (
                        option(
                            "out",
                            metavar="OUT.json",
                            help="the merged JSON report to write (-: stdout)",
                        ),
                        option("reports", metavar="IN.json", nargs="+", help="the shards' reports"),
                        *reports(),
                    ),
                    "podstate.commands.check:merge",
                ),
            ),
        ),
        Command(
            "inventory",
            "list the pods to manage (pods file or RunPod API), and the skipped ones",
            "exit status: 0 listed; 1 an error (the inventory cannot be read)",
            (
                json_flag("print JSON instead of a table"),
                option("--shard", metavar="K/N", help="only the pods of shard K of N"),
                option(
                    "--names",
                    action="store_true",
                    help="print only the names, one a line (for pyinfra --limit NAME ...)",
                ),
            ),
            "podstate.commands.inventory:inventory",
        ),
        Command(
            "watch",
            "put new, restarted, moved and drifted pods back, in a loop (or --once)",
            "exit status: 0 stopped by SIGTERM or SIGINT; with --once the fleet's after the "
            "pass (0 ok, 2 drift left, 1 worse); 1 an error before the first pass",
            (
                deploy("apply"),
                option(
                    "--interval",
                    type=float,
                    default=30.0,
                    metavar="SECONDS",
                    help="seconds from one pass to the next",
                ),
                option(
                    "--check-every",
                    type=int,
                    default=10,
                    metavar="N",
                    help="a drift check of the whole fleet every N passes, the first included",
                ),
                option(
                    "--max-backoff",
                    type=float,
                    default=900.0,
                    metavar="SECONDS",
                    help="the longest wait before a failing pod is tried again",
                ),
                option(
                    "--exclude",
                    action="append",
                    metavar="POD",
                    help="hold this pod (name or glob; repeatable): checked and logged, never "
                    "changed",
                ),
                option(
                    "--state",
                    metavar="PATH",
                    help="where the watch keeps since when each pod is idle "
                    "(default: ~/.cache/podstate/watch-state.json; watch-state-KofN.json "
                    "with --shard K/N)",
                ),
                option(
                    "--shard",
                    metavar="K/N",
                    help="watch only shard K of N: the pods whose name hashes to it, as "
                    "check --shard splits them (one runner of N)",
                ),
                option(
                    "--dry-run",
                    action="store_true",
                    help="log the idle pods it would stop, stop none",
                ),
                option(
                    "--notify",
                    action="append",
                    metavar="URL",
                    help="post each event a person should know of to this webhook as JSON "
                    "(repeatable; Slack's and Discord's take it as it is; also PODSTATE_NOTIFY)",
                ),
                option(
                    "--metrics-port",
                    type=number(int, 1),
                    metavar="PORT",
                    help="serve Prometheus metrics (and the fleet's page) on this port",
                ),
                option(
                    "--metrics-address",
                    default="127.0.0.1",
                    metavar="ADDRESS",
                    help="the address the metrics are served on (IPv4, IPv6 or a name)",
                ),
                json_flag("one JSON object per event line"),
                option(
                    "--once",
                    action="store_true",
                    help="one pass with a check, then exit with the fleet's status",
                ),
                option("--passes", type=int, help=argparse.SUPPRESS),  # tests: stop after N
            ),
            "podstate.commands.watch:watch",
        ),
        Command(
            "show",
            "show a pod's desired state, and the file each value comes from",
            "exit status: 0 shown; 1 an error (no such pod, the inventory cannot be read)",
            (option("pod", metavar="POD"), json_flag("print JSON instead of YAML")),
            "podstate.commands.show:show",
        ),
        Command(
            "init",
            "write a repository of your own for your pods, podstate a pinned dependency",
            "exit status: 0 written (or nothing to write); 1 a file it would write is there, "
            "or an error",
            (
                option("directory", nargs="?", default=".", metavar="DIR"),
                option(
                    "--update",
                    action="store_true",
                    help="rewrite podstate's starter files that this version writes otherwise "
                    "(never your vars)",
                ),
                option("--dry-run", action="store_true", help="say what would be written"),
            ),
            "podstate.commands.init:init",
        ),
        Command(
            "sandbox",
            "local sandbox pods: real sshd, RunPod-shaped",
            "exit status: 0 done; 1 an error",
            (
                option(
                    "action",
                    choices=["up", "down", "status", "restart", "api"],
                    help="restart POD: restart a pod as RunPod does (container disk wiped, "
                    "volume kept, new host key); api: print the shell lines that point "
                    "podstate at the sandbox's RunPod API",
                ),
                option("pod", nargs="?", help="the pod to restart (restart)"),
                option("--pods", type=number(int, 1), default=4, help="how many pods (up)"),
                option(
                    "--vast",
                    type=number(int, 0),
                    default=0,
                    metavar="N",
                    help="how many Vast.ai instances besides the pods (up; listed by the "
                    "sandbox's Vast API)",
                ),
                option(
                    "--nvidia-smi-delay",
                    type=number(float, 0),
                    default=0,
                    metavar="SECONDS",
                    help="how long each call of the pods' nvidia-smi takes (up; real multi-GPU "
                    "hosts without persistence mode take seconds)",
                ),
                option(
                    "--image",
                    default="host",
                    metavar="NAME",
                    help="the pods' root filesystem (up): host, the host's own / (the "
                    "default), or a Debian release (bullseye, trixie) built once with "
                    "debootstrap and cached",
                ),
            ),
            "podstate.commands.sandbox:sandbox",
        ),
    )


def handlers() -> dict[str, str]:
    """Return each runnable subcommand's handler (``module:function``) by the name that
    ``parser()`` leaves in ``command`` (``merge`` for ``report merge``)."""
    found: dict[str, str] = {}
    todo = list(table())
    while todo:
        command = todo.pop()
        todo += command.actions
        if command.handler:
            found[command.name] = command.handler
    return found


def _add(commands: Any, command: Command) -> None:
    """Add ``command``'s parser to ``commands`` (a subparsers action): its help says what it
    does (the summary) and how it exits; each of its options, or its own subcommands."""
    sub = commands.add_parser(
        command.name,
        help=command.summary,
        description=command.summary[0].upper() + command.summary[1:] + ".",
        epilog=command.exits,
        formatter_class=Help,
    )
    for each in command.options:
        each.add(sub)
    if command.actions:
        actions = sub.add_subparsers(dest="action", required=True, metavar="ACTION")
        for action in command.actions:
            _add(actions, action)
    else:
        sub.set_defaults(command=command.name)


def parser() -> Parser:
    """Return the argument parser of every subcommand; ``command`` names the one given (None
    for a bare ``podstate``)."""
    top = Parser(
        prog="podstate",
        description="The drift check, waiting for ready pods, the watch loop and the sandbox: "
        "what pyinfra's own CLI does not cover (pyinfra applies).",
        epilog=EXITS,
    )
    top.add_argument("--version", action=Version, version="")
    top.set_defaults(command=None)
    commands = top.add_subparsers(metavar="COMMAND", parser_class=Parser)
    for command in table():
        _add(commands, command)
    return top
