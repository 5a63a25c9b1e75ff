"""The ``podstate`` command's options, without pods: usage errors exit 1 (never 2, the
status of drift), the help says what each subcommand does and how it exits, report paths
are refused before anything runs, and the progress of a long run is shown as a terminal or a
log wants it."""

from __future__ import annotations

import io
import subprocess
from importlib import metadata

import pytest

from podstate import arguments, cli
from podstate.check import runner
from podstate.progress import LOG_EVERY, Progress
from podstate.watch.decisions import Pending
from podstate.watch.loop import Watch
from podstate.watch.options import Options
from tests.e2e import BIN, ROOT


def podstate(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the installed ``podstate`` with ``args`` from the repository root, as CI does."""
    return subprocess.run(
        [str(BIN / "podstate"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        env=env,
    )


# --- usage errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--timeout", "abc"],
        ["check", "--exclude", "p1"],
        ["report", "merge", "--json", "x.json"],
        ["chek"],
        ["check", "--timeout", "0"],
        ["wait", "--timeout", "-1"],
        ["wait", "--interval", "0"],
        ["wait", "--interval", "soon"],
        ["sandbox", "up", "--pods", "0"],
        ["report"],
    ],
)
def test_a_usage_error_exits_1_never_2(argv):
    run = podstate(*argv)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert "usage: podstate" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_usage_error_names_the_option_and_what_it_must_be():
    run = podstate("wait", "--interval", "0")
    assert run.stderr.splitlines()[-1] == (
        "podstate wait: error: argument --interval: 0 must be above 0"
    )


def test_bare_podstate_prints_the_help_and_exits_1():
    run = podstate()
    assert run.returncode == 1
    assert run.stderr.startswith("usage: podstate")
    for command in ("check", "wait", "report", "inventory", "watch", "sandbox"):
        assert f"    {command}" in run.stderr


def test_version_names_podstate_and_pyinfra():
    run = podstate("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout == (
        f"podstate {metadata.version('podstate')} (pyinfra {metadata.version('pyinfra')})\n"
    )


# --- the table ----------------------------------------------------------------------------


def test_every_subcommand_is_in_the_table_once_with_a_handler_that_exists():
    """Each subcommand the parser takes has one handler, named in the table, that imports
    and takes the parsed arguments; a group (``report``) has subcommands instead."""
    import importlib
    import inspect

    leaves = [command for group in arguments.table() for command in (group.actions or (group,))]
    names = [command.name for command in leaves]
    assert len(names) == len(set(names)) and set(arguments.handlers()) == set(names)
    assert set(names) == {words.split()[-1] for words in subcommands() if words != "report"}
    for command in leaves:
        module, function = command.handler.split(":")
        handler = getattr(importlib.import_module(module), function)
        assert list(inspect.signature(handler).parameters) == ["args"], command.name


# --- help ---------------------------------------------------------------------------------


def subcommands() -> dict[str, object]:
    """Return every subcommand's parser by its words (``report merge`` included)."""
    found, todo = {}, [((), arguments.parser())]
    while todo:
        words, parser = todo.pop()
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    found[" ".join((*words, name))] = sub
                    todo.append(((*words, name), sub))
    return found


@pytest.mark.parametrize("words", sorted(subcommands()))
def test_every_subcommands_help_says_what_it_does_and_how_it_exits(words):
    run = podstate(*words.split(), "--help")
    assert run.returncode == 0, run.stderr
    description = subcommands()[words].description
    assert description and description.endswith(".")
    assert " ".join(description.split())[:30] in " ".join(run.stdout.split())
    assert "exit status: 0" in run.stdout and " 1 " in run.stdout


def test_every_option_is_described_with_its_default():
    for words, parser in subcommands().items():
        for action in parser._actions:
            if not action.option_strings or action.help == "==SUPPRESS==":
                continue
            assert action.help, f"podstate {words} {action.option_strings[0]} is not described"
            shown = parser.formatter_class("x")._get_help_string(action)
            if action.default not in (None, False, "==SUPPRESS=="):
                assert "default" in shown, f"podstate {words} {action.option_strings[0]}"


def test_check_describes_timeout_and_inventory():
    run = podstate("check", "--help")
    text = " ".join(run.stdout.split())
    assert "--timeout SECONDS how long connecting to a pod may take" in text
    assert "--inventory FILE the pyinfra inventory file" in text


# --- report paths -------------------------------------------------------------------------


def test_a_report_path_that_cannot_be_written_is_refused_before_any_pod(tmp_path):
    """No inventory exists here: a check that got as far as reading it would say so."""
    for option in ("--json", "--junit", "--markdown"):
        run = podstate("check", "--inventory", "nosuch.py", option, "/nonexistent/x")
        assert (run.returncode, run.stdout) == (1, "")
        assert run.stderr == (
            "podstate: cannot write the report /nonexistent/x: no directory /nonexistent\n"
        )
    run = podstate("check", "--inventory", "nosuch.py", "--json", str(tmp_path))
    assert run.stderr == f"podstate: cannot write the report {tmp_path}: it is a directory\n"


def test_merge_refuses_an_unwritable_report_before_reading_the_shards(tmp_path):
    run = podstate("report", "merge", "/nonexistent/all.json", str(tmp_path / "missing.json"))
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == (
        "podstate: cannot write the report /nonexistent/all.json: no directory /nonexistent\n"
    )


def test_only_one_report_may_go_to_stdout():
    run = podstate("check", "--json", "-", "--markdown", "-")
    assert run.returncode == 1
    assert run.stderr == "podstate: only one report can be written to stdout (-)\n"


# --- wait ---------------------------------------------------------------------------------


def test_wait_connects_as_check_does(monkeypatch):
    """``podstate wait`` hands each check the connect timeout of the environment and
    ``--strict-host-keys`` (runner.run stands in: this is the wiring, not the check)."""
    from podstate import settings

    calls = []

    def checked(*args, **kwargs):
        calls.append(kwargs)
        return {}

    monkeypatch.setattr(runner, "run", checked)
    monkeypatch.setattr(settings, "CONNECT_TIMEOUT", 37)
    assert cli.main(["wait", "--strict-host-keys", "--timeout", "0"]) == 0
    ((kwargs),) = calls
    assert kwargs["timeout"] == 37 and kwargs["strict_host_keys"] is True


# --- watch --------------------------------------------------------------------------------


def test_watch_once_announces_no_next_try():
    out = io.StringIO()
    once = Watch(Options(deploys=["deploy/pod.py"], once=True), out=out)
    once.number = 1
    once._failed("pod-1", Pending("drift"), "it failed", "apply")
    assert out.getvalue().rstrip().endswith("it failed"), out.getvalue()
    assert "next try" not in out.getvalue()


# --- progress -----------------------------------------------------------------------------


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_a_line_every_30_seconds_while_pods_run_and_none_after():
    clock, out = Clock(), io.StringIO()
    progress = Progress("check", out, tty=False, clock=clock)
    for pod in ("pod-1", "pod-2", "pod-3"):
        progress.pod(pod, "connecting")
    clock.now += 1
    progress.pod("pod-1", "planning")
    progress.pod("pod-3", "checked")
    progress.tick()
    assert out.getvalue() == ""  # not 30 s yet
    clock.now += LOG_EVERY - 1
    progress.tick()
    progress.tick()
    assert out.getvalue() == (
        "podstate check: 1 of 3 pods checked, 30 s; "
        "slowest: pod-2 (connecting, 30 s), pod-1 (planning, 29 s)\n"
    )
    for pod in ("pod-1", "pod-2"):
        progress.pod(pod, "checked")
    clock.now += LOG_EVERY
    progress.tick()
    progress.clear()
    assert out.getvalue().count("\n") == 1  # every pod done: nothing more


def test_a_terminal_line_is_redrawn_in_place_and_cleared(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    clock, out = Clock(), io.StringIO()
    progress = Progress("wait", out, tty=True, done="ready", clock=clock)
    progress.tick()
    assert out.getvalue() == "\rpodstate wait: listing the pods, 0 s\x1b[K"
    for n in range(1, 6):
        progress.pod(f"pod-{n}", "not ready")
    progress.pod("pod-1", "ready")
    clock.now += 5
    progress.tick()
    progress.clear()
    assert out.getvalue().endswith(
        "\rpodstate wait: 1 of 5 pods ready, 5 s; slowest: pod-2 (not ready, 5 s), "
        "pod-3 (not ready, 5 s), pod-4 (not ready, 5 s), 1 more\x1b[K\r\x1b[K"
    )


@pytest.mark.parametrize("columns", ["-5", "0", "wide"])
def test_a_columns_that_is_no_width_is_the_terminals_or_80(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()  # no terminal: 80 columns
    progress = Progress("check", out, tty=True, clock=Clock())
    progress.pod("pod-1", "connecting")
    progress.tick()
    assert (
        out.getvalue()
        == "\rpodstate check: 0 of 1 pods checked, 0 s; slowest: pod-1 (connecting, 0 s)\x1b[K"
    )


def test_a_terminal_line_never_wraps(monkeypatch):
    monkeypatch.setenv("COLUMNS", "30")
    out = io.StringIO()
    progress = Progress("check", out, tty=True, clock=Clock())
    progress.pod("pod-1", "connecting")
    progress.tick()
    assert out.getvalue() == "\rpodstate check: 0 of 1 pods c\x1b[K"  # 29 columns, and the cursor
