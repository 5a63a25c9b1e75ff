"""End to end: the ``podstate`` command on sandbox pods: the progress of a run while a pod
hangs (in a log, on a terminal), ``--json -``, and report paths refused before any pod is
contacted."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import threading

import pytest

from podstate.progress import LOG_EVERY
from tests.e2e import BIN, ROOT, check, exec_count
from tests.test_faults import Watched, freeze

SANDBOX = {"pods": 3}
PODS = ("pod-1", "pod-2", "pod-3")
# A hung pod's connection waits until the test lets it go, however long that takes.
PATIENT = {"PODSTATE_CONNECT_TIMEOUT": "600"}


@pytest.fixture
def hung(fleet):
    """pod-2 stopped (sshd and all: it accepts a connection and never answers), until the
    test ends."""
    freeze("pod-2", signal.SIGSTOP)
    try:
        yield fleet
    finally:
        freeze("pod-2", signal.SIGCONT)


def test_json_to_stdout_and_the_table_to_stderr(fleet):
    result = check(fleet, "--json", "-")
    document = json.loads(result.stdout)
    assert set(document["pods"]) == set(PODS)
    assert result.returncode == document["summary"]["exit_code"]
    assert result.stderr.startswith("pod-1")  # the table, whose first line is the first pod
    assert not (ROOT / "-").exists()


def test_an_unwritable_report_is_refused_before_any_pod_is_contacted(fleet):
    before = {pod: exec_count(fleet, pod) for pod in PODS}
    result = check(fleet, "--json", "/nonexistent/x.json")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "podstate: cannot write the report /nonexistent/x.json: no directory /nonexistent\n"
    )
    assert {pod: exec_count(fleet, pod) for pod in PODS} == before


def test_a_log_gets_a_progress_line_while_a_pod_hangs(hung):
    """Without a terminal (CI), a line on stderr once LOG_EVERY seconds have passed with a
    pod still running, naming it; stdout is the JSON report alone."""
    run = Watched(
        subprocess.Popen(
            [str(BIN / "podstate"), "check", "--json", "-"],
            cwd=ROOT,
            env={**hung.env(), **PATIENT},
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    )
    try:
        shown = run.wait_for_line("slowest: pod-2 (connecting", limit=LOG_EVERY + 60)
    finally:
        freeze("pod-2", signal.SIGCONT)
    returncode, stdout, stderr = run.finish()
    assert shown, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("podstate check: ")]
    assert line.startswith("podstate check: 0 of 3 pods checked, ")
    document = json.loads(stdout)
    assert returncode == document["summary"]["exit_code"]
    assert document["pods"]["pod-2"]["status"] != "unreachable"


class Terminal:
    """A command whose stderr is a terminal (a pty), whose output is collected as it comes."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**env, "COLUMNS": "200"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        self.shown = b""
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # the command ended: the pty has no writer left
                data = b""
            with self.changed:
                self.shown += data
                self.changed.notify_all()
            if not data:
                return

    def wait_for(self, text: bytes, limit: float = 90) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: text in self.shown, timeout=limit), self.shown

    def finish(self) -> tuple[int, bytes]:
        stdout, _ = self.process.communicate(timeout=300)
        return self.process.returncode, stdout


@pytest.mark.parametrize("command", ["check", "wait"])
def test_a_terminal_shows_progress_and_clears_it_before_the_table(hung, command):
    args = ["--timeout", "0"] if command == "wait" else []
    terminal = Terminal([str(BIN / "podstate"), command, *args], {**hung.env(), **PATIENT})
    try:
        terminal.wait_for(b"slowest: pod-2 (connecting, ")
    finally:
        freeze("pod-2", signal.SIGCONT)
    returncode, stdout = terminal.finish()
    done = "checked" if command == "check" else "ready"
    assert f"\rpodstate {command}: 0 of 3 pods {done}, ".encode() in terminal.shown
    assert terminal.shown.endswith(b"\r\x1b[K")  # cleared: the terminal is as it was
    assert b"\x1b" not in stdout and b"podstate " not in stdout
    if command == "check":
        assert stdout.startswith(b"pod-1") and stdout.endswith(f"; exit {returncode}\n".encode())
    else:  # nothing applied yet: no pod is ready
        assert b"3 of 3 not ready after 0 s:" in stdout and returncode == 1
