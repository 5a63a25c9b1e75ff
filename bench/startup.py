"""Start-up time: from process start to the first connection attempt to a pod.

Run from the repository root: ``python bench/startup.py`` (``--runs N``, ``--only check``
or ``--only pyinfra``). A local TCP listener stands in for a pod: the pods file names it,
it notes when the command's first connection reaches it and closes it at once, so the run
ends there (the pod "cannot be reached"). The time runs from just before the process is
started, so it counts the interpreter's own start, every import, the inventory and the
deploy files: what a user waits before podstate or pyinfra touches the first pod.

The command runs under a hook (``sys.addaudithook``) that notes the process's CPU seconds
(user and system) at its first connection: on a loaded machine that figure moves less than
the wall-clock one. It prints each command's medians of ``--runs`` runs, taken in turns.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Runs the script argv[1] as its console script runs it; at the first TCP connection, writes
# the CPU seconds spent so far to the file STARTUP_CPU names.
HOOK = """
import os, runpy, sys
def hook(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and os.environ["STARTUP_CPU"]:
        times = os.times()
        with open(os.environ["STARTUP_CPU"], "w") as out:
            out.write(str(times.user + times.system))
        os.environ["STARTUP_CPU"] = ""
sys.addaudithook(hook)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _commands(port: int, empty: str = "empty.py") -> dict[str, list[str]]:
    """Return each measured command's argv, run from the repository root: podstate's check,
    pyinfra with podstate's inventory and deploy files, the same with the deploy file
    ``empty`` instead (plain pyinfra's CLI on the same inventory: what the deploy files add
    is the difference), and for reference pyinfra's own start (no podstate in it) to the
    same listener."""
    deploys = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "deploy").glob("*.py"))
    pyinfra = [str(BIN / "pyinfra"), "-y", "inventories/pods.py"]
    return {
        "check": [str(BIN / "podstate"), "check", "--timeout", "5"],
        "pyinfra": [*pyinfra, *deploys],
        "empty": [*pyinfra, empty],
        "bare": [
            str(BIN / "pyinfra"),
            "-y",
            "--data",
            f"ssh_port={port}",
            "127.0.0.1",
            "exec",
            "--",
            "true",
        ],
    }


class _Pod:
    """A listener on 127.0.0.1 that notes the monotonic time of each connection it accepts,
    and closes it: a pod that is there for TCP and nothing more."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.socket.getsockname()[1]
        self.accepted: list[float] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.accepted.append(time.monotonic())
            conn.close()


def _pods_file(folder: Path, port: int) -> Path:
    """Return a pods file that lists one pod, at the listener's port."""
    path = folder / "pods.yaml"
    path.write_text(
        "pods:\n"
        "  startup-1:\n"
        "    ssh_hostname: 127.0.0.1\n"
        f"    ssh_port: {port}\n"
        "    ssh_user: root\n"
    )
    return path


def measure(name: str, argv: list[str], pod: _Pod, env: dict[str, str]) -> tuple[float, float]:
    """Return the seconds from just before ``argv`` starts to its first connection to
    ``pod``, and the CPU seconds it had spent then; RuntimeError if it exits without
    connecting (its output then says why)."""
    pod.accepted.clear()
    cpu = Path(env["STARTUP_CPU"])
    cpu.unlink(missing_ok=True)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", HOOK, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not pod.accepted or not cpu.exists():
        raise RuntimeError(f"{name} never connected:\n{done.stdout}{done.stderr}")
    return pod.accepted[0] - start, float(cpu.read_text())


def first_connections(runs: int, only: str | None = None) -> dict[str, tuple[float, float]]:
    """Return, for each command of ``_commands`` (``only``: that one), the median seconds
    from its start to its first connection and the median CPU seconds it spent by then, of
    ``runs`` runs taken in turns (a busy moment slows each command alike); RuntimeError if
    one exits without connecting."""
    pod = _Pod()
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.py"
        empty.write_text('"""A deploy file that does nothing."""\n')
        env = {
            **os.environ,
            "PODSTATE_PODS": str(_pods_file(Path(tmp), pod.port)),
            "HOME": tmp,  # no known_hosts, no agent keys of the user's: the same every run
            "SSH_AUTH_SOCK": "",
            "STARTUP_CPU": str(Path(tmp) / "cpu"),
        }
        for name in ("RUNPOD_API_KEY", "VAST_API_KEY", "PODSTATE_INVENTORY", "XDG_CACHE_HOME"):
            env.pop(name, None)
        commands = {
            n: argv for n, argv in _commands(pod.port, str(empty)).items() if only in (None, n)
        }
        found: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                found[name].append(measure(name, argv, pod, env))
    return {
        name: (statistics.median(w for w, _ in times), statistics.median(c for _, c in times))
        for name, times in found.items()
    }


def main(args: list[str] | None = None) -> int:
    """Measure each command ``--runs`` times (``bare``: pyinfra alone, the floor podstate
    adds to); print the medians; return 0, or 1 if one never connected."""
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--runs", type=int, default=7, help="runs of each command")
    options.add_argument("--only", choices=sorted(_commands(0)), help="measure one command")
    chosen = options.parse_args(args)
    try:
        found = first_connections(chosen.runs, chosen.only)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    for name, (wall, cpu) in found.items():
        print(f"{name:8} median {wall:.3f} s, CPU {cpu:.3f} s ({chosen.runs} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
