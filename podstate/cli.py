"""The podstate command: what pyinfra's own CLI does not cover.

Its subcommands are the table in ``podstate.arguments``; ``main`` parses the command line,
imports the handler of the one given (only it: a check loads neither the watch nor the
sandbox) and turns podstate's own errors into one line and exit status 1.
"""

from __future__ import annotations

import importlib
import sys
from argparse import Namespace
from collections.abc import Callable

from podstate import signals
from podstate.arguments import handlers, parser
from podstate.pyinfra_api.verify import verify

__all__ = ["main", "parser"]

# The errors a handler raises that are one line for the user, as module:class; a module
# not yet imported cannot have raised its error, so none is imported to tell.
ONE_LINE_ERRORS = (
    "podstate.pyinfra_api.verify:Unsupported",
    "podstate.check.runner:CheckFailed",
    "podstate.desired.errors:SpecError",
    "podstate.check.shards:ShardError",
    "podstate.watch.options:WatchError",
)


def _one_line(error: Exception) -> bool:
    """Return whether ``error`` is one of ONE_LINE_ERRORS (or a subclass of one)."""
    for name in ONE_LINE_ERRORS:
        module, kind = name.split(":")
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(error, getattr(loaded, kind)):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; errors are one line on stderr and exit status 1, a usage error
    too. A bare ``podstate`` prints the help, and exits 1: a CI line whose subcommand came
    out empty must not pass."""
    top = parser()
    args = top.parse_args(argv)
    if args.command is None:
        top.print_help(sys.stderr)
        return 1
    signals.install()
    try:
        verify()  # a pyinfra that lacks an internal podstate relies on: one line, nothing run
        module, function = handlers()[args.command].split(":")
        handler: Callable[[Namespace], int] = getattr(importlib.import_module(module), function)
        return handler(args)
    except Exception as e:
        if not _one_line(e):
            raise
        print(f"podstate: {e}", file=sys.stderr)
        return 1
