"""Helpers for end-to-end tests: a sandbox fleet, real ssh, the real pyinfra CLI."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Jenkins' strict JUnit schema, which its xunit plugin validates reports with (the file says
# where it comes from).
JUNIT_XSD = ROOT / "tests" / "fixtures" / "junit-10.xsd"


def junit_errors(report: Path | str) -> list[str]:
    """Return why the JUnit report (a file, or its XML text) is invalid against JUNIT_XSD,
    one line per error; [] when it is valid."""
    import xmlschema

    source = str(report) if isinstance(report, Path) else report
    return [f"{e.path}: {e.reason}" for e in xmlschema.XMLSchema(JUNIT_XSD).iter_errors(source)]


@dataclass
class Fleet:
    """Sandbox pods plus a vars directory of the test's own."""

    state: Path
    pods_file: Path
    vars_dir: Path

    @property
    def pods(self) -> dict:
        return yaml.safe_load(self.pods_file.read_text())["pods"]

    def env(self, pods_file: Path | None = None) -> dict[str, str]:
        return {
            **os.environ,
            "PODSTATE_PODS": str(pods_file or self.pods_file),
            "PODSTATE_VARS": str(self.vars_dir),
            "PODSTATE_SANDBOX": str(self.state),
        }

    def api_env(self, hostkeys: Path | None = None) -> dict[str, str]:
        """Return the environment of a user whose pods come from the sandbox's RunPod API
        (``podstate.sandbox.api.api_env``): no pods file, this fleet's vars, the host-key store
        ``hostkeys`` (default: the sandbox's own, in its state directory)."""
        from podstate.sandbox.api import api_env

        env = {k: v for k, v in os.environ.items() if not k.startswith(("PODSTATE_", "RUNPOD_"))}
        env.update(api_env(self.state))
        env.update(PODSTATE_VARS=str(self.vars_dir), PODSTATE_SANDBOX=str(self.state))
        if hostkeys is not None:
            env["PODSTATE_HOSTKEYS"] = str(hostkeys)
        return env

    def ssh(self, pod: str, command: str, data: bytes = b"") -> subprocess.CompletedProcess:
        """Run ``command`` on ``pod`` the way a user does: ``ssh pod CMD``, ``data`` on stdin."""
        from podstate.sandbox import ssh

        return ssh.ssh(pod, command, data)

    def out(self, pod: str, command: str, data: bytes = b"") -> str:
        result = self.ssh(pod, command, data)
        assert result.returncode == 0, f"{pod}: {command}: {result.returncode}: {result.stderr}"
        return result.stdout

    def host_vars(self, pod: str, data: dict | str | None) -> None:
        """Set (or with None, remove) ``host_vars/<pod>.yaml`` (a string: as it is)."""
        write_vars(self.vars_dir, f"host_vars/{pod}.yaml", data)

    def group_vars(self, group: str, data: dict | str | None, merge: bool = False) -> None:
        """Set ``group_vars/<group>.yaml`` (``write_vars``: with ``merge``, add to it)."""
        write_vars(self.vars_dir, f"group_vars/{group}.yaml", data, merge)


def new_vars_dir(target: Path) -> Path:
    """Return a copy of the shipped inventories/ group_vars, for a test to change freely."""
    (target / "host_vars").mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "inventories" / "group_vars", target / "group_vars")
    return target


def write_vars(root: Path, name: str, data: dict | str | None, merge: bool = False) -> Path:
    """Write the vars file ``name`` ("group_vars/all.yaml", "host_vars/pod-1.yaml",
    "groups.yaml") of the vars directory ``root``, and return its path: ``data`` as YAML, or
    a string as it is (a file a test wants malformed); with ``merge``, ``data``'s keys over
    those the file has; None removes the file. The one way tests write a desired state. A
    whole all.yaml is the whole state (``whole``), as it was before podstate shipped its
    defaults."""
    path = root / name
    if data is None:
        path.unlink(missing_ok=True)
        return path
    if merge:
        data = {**(yaml.safe_load(path.read_text()) or {}), **data}
    elif name in ("group_vars/all.yaml", "group_vars/all.yml") and isinstance(data, dict):
        data = whole(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def whole(data: dict, shipped: dict | None = None) -> dict:
    """Return ``data`` with a null (which drops it) for each of podstate's shipped defaults
    (``shipped``: below the top, those of the same key) that it leaves out, so that its
    state is ``data`` alone."""
    if shipped is None:
        from podstate.desired.load import shipped as shipped_layer

        shipped = shipped_layer().data
    out = dict(data)
    for key, value in shipped.items():
        if key not in out:
            out[key] = None
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = whole(out[key], value)
    return out


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    json: dict | None

    def hosts(self, key: str) -> set[str]:
        """Return the hosts listed under ``key`` (success/no_change/error) of any operation."""
        return {h for op in self.json["results"]["operations"] for h in op[key]}


def run(
    fleet: Fleet,
    command: list[str],
    pods_file: Path | None = None,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
):
    """Run a command from the repository root (or ``cwd``) as CI does: no TTY, stdin closed;
    in ``env`` (``Fleet.api_env()``, say) or else the fleet's pods file environment."""
    return subprocess.run(
        command,
        cwd=cwd,
        env=env or fleet.env(pods_file),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


def apply(
    fleet: Fleet,
    *args: str,
    pods_file: Path | None = None,
    dry: bool = False,
    deploys: list[str] | None = None,
    cwd: Path = ROOT,
    bin_dir: Path = BIN,
    env: dict[str, str] | None = None,
) -> Run:
    """Run ``pyinfra -y --json inventories/pods.py deploy/*.py`` as a user would (the shell's
    ``deploy/*.py`` of ``cwd``, unless ``deploys`` names the files). ``dry`` runs ``--dry``
    instead of ``-y``, which would skip pyinfra's change detection: a plan without a change.
    ``env``: as for ``run``."""
    deploys = deploys or sorted(str(p.relative_to(cwd)) for p in (cwd / "deploy").glob("*.py"))
    command = [
        str(bin_dir / "pyinfra"),
        "--dry" if dry else "-y",
        "--json",
        *args,
        "inventories/pods.py",
        *deploys,
    ]
    result = run(fleet, command, pods_file, cwd, env)
    try:
        parsed = json.loads(result.stdout) if result.stdout.strip() else None
    except json.JSONDecodeError:
        parsed = None
    return Run(result.returncode, result.stdout, result.stderr, parsed)


def check(
    fleet: Fleet,
    *args: str,
    pods_file: Path | None = None,
    cwd: Path = ROOT,
    bin_dir: Path = BIN,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``podstate check``; ``env``: as for ``run``."""
    return run(fleet, [str(bin_dir / "podstate"), "check", *args], pods_file, cwd, env)


def exec_count(fleet: Fleet, pod: str) -> int:
    """Return how many exec requests (remote commands) the pod's sshd has served so far."""
    from podstate.sandbox import inside

    return inside.commands_served(fleet.state)[pod]


def start_apply(
    fleet: Fleet,
    env: dict[str, str] | None = None,
    vars_dir: Path | None = None,
    cwd: Path = ROOT,
    deploys: tuple[str, ...] = ("deploy/pod.py",),
) -> subprocess.Popen:
    """Start ``pyinfra -y inventories/pods.py deploy/pod.py`` (or ``deploys``) in ``cwd``, in
    the background."""
    environment = {**fleet.env(), **(env or {})}
    if vars_dir:
        environment["PODSTATE_VARS"] = str(vars_dir)
    return subprocess.Popen(
        [str(BIN / "pyinfra"), "-y", "inventories/pods.py", *deploys],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


class Watching:
    """A watch running in the background, its event lines collected as they come."""

    def __init__(
        self, fleet: Fleet, *args: str, pods_file: Path | None = None, env: dict | None = None
    ) -> None:
        self.process = subprocess.Popen(
            [str(BIN / "podstate"), "watch", "--json", "--interval", "3600", *args],
            cwd=ROOT,
            # A hung watch's stacks, for the failure (``finish``)
            env={**(env or fleet.env(pods_file)), "PYTHONFAULTHANDLER": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a process group of its own, as a terminal gives it
        )
        self.events: list[dict] = []
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def until(self, wanted: Callable[[dict], bool]) -> dict:
        """Return the next event ``wanted`` accepts, keeping every event read on the way;
        fail if the watch ends first."""
        while True:
            line = self.lines.get(timeout=300)  # a bound for a hung watch, not a wait
            assert line is not None, f"the watch ended: {self.process.wait()} {self.stderr()}"
            event = json.loads(line)
            self.events.append(event)
            if wanted(event):
                return event

    def end_of_pass(self, number: int) -> dict:
        return self.until(lambda e: e["pass"] == number and e["pod"] is None)

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def ctrl_c(self) -> None:
        """Send SIGINT to the watch's whole process group, as a terminal's Ctrl-C does."""
        os.killpg(self.process.pid, signal.SIGINT)

    def finish(self) -> int:
        """Wait for the watch to exit; return its status, every event read. A watch still
        running after 300 s fails the test with its threads' stacks and its events."""
        try:
            status = self.process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGABRT)  # faulthandler writes every thread's stack
            self.process.wait(timeout=60)
            unread = list(self.lines.queue)
            raise AssertionError(
                f"the watch hung: {self.stderr()}\nevents: {self.events} then {unread}"
            ) from None
        while (line := self.lines.get(timeout=60)) is not None:
            self.events.append(json.loads(line))
        return status

    def stderr(self) -> str:
        return self.process.stderr.read() if self.process.poll() is not None else ""

    def through(self, done: Callable[[list[dict]], bool]) -> list[dict]:
        """Read events until ``done`` accepts those read so far, then to the end of that
        pass; stop the watch there (SIGTERM) and return every event, once it exited 0."""
        event = self.until(lambda _: done(self.events))
        if event["pod"] is not None:
            self.end_of_pass(event["pass"])
        self.signal(signal.SIGTERM)
        assert self.finish() == 0, self.stderr()
        return self.events

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
