"""The command line and the sandbox: loaded only for ``podstate sandbox``, help in plain text."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from podstate import cli


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Return ``parser`` and every subcommand's parser under it, depth first."""
    found = [parser]
    for action in parser._actions:  # argparse keeps subcommands nowhere else
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_check_does_not_load_the_sandbox() -> None:
    script = (
        "import sys\n"
        "from podstate import arguments, cli\n"
        "args = cli.parser().parse_args(['check', '--inventory', 'inventories/pods.py'])\n"
        "assert arguments.handlers()[args.command] == 'podstate.commands.check:check'\n"
        "import podstate.commands.check\n"
        "print(sorted(m for m in sys.modules if m.startswith('podstate.sandbox')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout == "[]\n"


def test_sandbox_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["sandbox", "up", "pod-1"]) == 1
    assert capsys.readouterr().err == (
        "podstate: podstate sandbox up: only restart takes a pod name, not 'pod-1'\n"
    )


def test_help_is_plain_text() -> None:
    parsers = _parsers(cli.parser())
    assert {p.prog for p in parsers} >= {"podstate sandbox", "podstate check", "podstate watch"}
    for parser in parsers:
        text = parser.format_help()
        assert "``" not in text, f"{parser.prog} --help shows reStructuredText: {text}"
