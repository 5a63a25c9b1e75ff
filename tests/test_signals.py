"""podstate's SIGINT/SIGTERM handling in a plain Python process (no pods needed).

Each signal is sent at a moment the child announces on stdout, and the child waits on its
stdin until the test lets it go: no timing is involved.
"""

import signal
import subprocess
import sys

import pytest

from tests.e2e import ROOT

CHILD = """
import atexit, sys
def shutting_down():  # registered before podstate's hook, so it runs after it
    print("shutting down", flush=True)
    sys.stdin.readline()
atexit.register(shutting_down)
from podstate import signals
signals.install()
print("running", flush=True)
sys.stdin.readline()
sys.exit(3)
"""


def start():
    return subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_while_running_stops_with_one_line(sig):
    child = start()
    assert child.stdout.readline() == "running\n"
    child.send_signal(sig)
    stdout, stderr = child.communicate(timeout=30)
    assert child.returncode == 128 + sig
    assert stderr.strip().startswith(f"podstate: stopped by {signal.Signals(sig).name}")
    assert "\n" not in stderr.strip()


def test_signals_at_shutdown_leave_the_runs_own_status():
    """Ctrl-C (or SIGTERM) after the run has finished, while Python exits: the process ends
    with its own status, silently, instead of dying by the signal or printing noise."""
    child = start()
    assert child.stdout.readline() == "running\n"
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.stdout.readline() == "shutting down\n"
    child.send_signal(signal.SIGINT)
    child.send_signal(signal.SIGTERM)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate("go\n", timeout=30)
    assert child.returncode == 3, stderr
    assert stderr == ""
