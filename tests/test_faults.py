"""Faults: runs killed, pods dying or hanging mid-run, two runs at once.

Every pod file podstate manages is either its old or its new version afterwards, the
other pods finish normally, and the next run converges.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from podstate.sandbox import container, inside, lifecycle
from tests.e2e import BIN, ROOT, apply, exec_count, new_vars_dir, start_apply, write_vars

FILES = "cat /etc/profile.d/podstate.sh; echo ==; cat ~/.bashrc"
FAST = {
    "PODSTATE_LOCK_WAIT": "3",
    "PODSTATE_LOCK_GRACE": "2",
    "PODSTATE_COMMAND_TIMEOUT": "6",
    "PODSTATE_CONNECT_TIMEOUT": "3",
}


@pytest.fixture(autouse=True)
def fast_limits(monkeypatch):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def states(fleet, tmp_path_factory):
    """Two desired states, A and B, that differ in the profile; returns their vars dirs."""
    dirs = {}
    for name in ("A", "B"):
        root = new_vars_dir(tmp_path_factory.mktemp(f"vars{name}"))
        write_vars(
            root, "group_vars/community.yaml", {"env": {"STATE": name}, "shm": {"min_size": "32M"}}
        )
        write_vars(root, "group_vars/secure.yaml", {"env": {"STATE": name}})
        dirs[name] = root
    return dirs


def converge(fleet, vars_dir):
    fleet.vars_dir, old = vars_dir, fleet.vars_dir
    try:
        run = apply(fleet)
    finally:
        fleet.vars_dir = old
    assert run.returncode == 0, run.stderr
    return {pod: fleet.out(pod, FILES) for pod in fleet.pods}


@pytest.fixture(scope="module")
def contents(fleet, states):
    """Each pod's managed files under state B and under state A (the fleet is left at A)."""
    b = converge(fleet, states["B"])
    a = converge(fleet, states["A"])
    assert a != b
    return {"A": a, "B": b}


def wait_for_probe(fleet, pod, before, limit=60):
    deadline = time.monotonic() + limit
    while exec_count(fleet, pod) <= before:
        assert time.monotonic() < deadline, f"{pod} was never probed"
        time.sleep(0.05)


def hold_lock(pod, owner="ci-job-7", expires_in=3600):
    inside.pod_exec(
        pod,
        f"touch /run/podstate.lock.mutex && mkdir -p /run/podstate.lock"
        f" && echo other > /run/podstate.lock/token"
        f" && echo {owner} > /run/podstate.lock/owner"
        f" && echo $(($(date +%s) + {expires_in})) > /run/podstate.lock/expires",
    )


def test_config_replaces_pyinfras_ctrl_c_handler(tmp_path):
    """pyinfra's SIGINT handler exits 0, as if the run had succeeded; config.py, the first
    file of podstate's a run loads, puts podstate's in its place before the inventory."""
    inventory = tmp_path / "inventory.py"
    inventory.write_text(
        "import signal\n"
        "handler = signal.getsignal(signal.SIGINT)\n"
        "raise SystemExit(f'SIGINT handler: {handler.__module__}.{handler.__name__}')\n"
    )
    result = subprocess.run(
        [str(BIN / "pyinfra"), "-y", str(inventory), "deploy/pod.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert "SIGINT handler: podstate.signals._exit" in result.stderr, result.stderr


class Watched:
    """A started run whose stderr lines are collected as they come, so a test can wait for
    one (the run's own progress) instead of for a length of time."""

    def __init__(self, run: subprocess.Popen):
        self.run = run
        self.lines: list[str] = []
        self.stdout = ""
        self.changed = threading.Condition()
        self.readers = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_stderr(self) -> None:
        for line in self.run.stderr:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.lines.append(None)  # end of output
            self.changed.notify_all()

    def _read_stdout(self) -> None:
        self.stdout = self.run.stdout.read()

    def wait_for_line(self, text: str, limit: float = 60) -> bool:
        """Wait until a stderr line contains ``text`` (True) or the output ends (False)."""
        with self.changed:
            found = self.changed.wait_for(
                lambda: (
                    any(text in line for line in self.lines if line)
                    or (self.lines and self.lines[-1] is None)
                ),
                timeout=limit,
            )
            assert found, f"neither {text!r} nor the end of the run came in {limit}s"
            return any(text in line for line in self.lines if line)

    def finish(self) -> tuple[int, str, str]:
        returncode = self.run.wait(timeout=60)
        for reader in self.readers:
            reader.join(timeout=10)
        return returncode, self.stdout, "".join(line for line in self.lines if line)


def ignores(pid: int, *signums: int) -> bool | None:
    """Whether process ``pid`` ignores all of ``signums`` (None once it has exited)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status)
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields["State"].split()[0] in ("Z", "X"):
        return None
    ignored = int(fields["SigIgn"], 16)
    return all(ignored & (1 << (signum - 1)) for signum in signums)


def namespace_pids(leader: int) -> set[int]:
    """Return the processes in the mount namespace of ``leader`` (a pod)."""
    try:
        target = os.readlink(f"/proc/{leader}/ns/mnt")
    except FileNotFoundError:  # the pod is down
        return set()
    pids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == target:
                pids.add(int(pid))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return pids


def pod_processes() -> dict[str, set[int]]:
    """Each pod's processes: its sshd and storage mount when idle, plus live sessions."""
    return {p.name: namespace_pids(p.pid) for p in lifecycle.status()}


def wait_until_idle(idle: dict[str, set[int]], limit: float = 60) -> None:
    """Wait until every command a stopped run had started on a pod has ended: each pod is
    back to the processes it had before the run (``idle``)."""
    deadline = time.monotonic() + limit
    while busy := {pod for pod, pids in pod_processes().items() if pids - idle[pod]}:
        assert time.monotonic() < deadline, f"commands still running on {sorted(busy)}"
        time.sleep(0.05)


LOCK_EXPIRED = (
    "L=/run/podstate.lock; if [ ! -d $L ]; then echo free;"
    ' elif [ "$(date +%s)" -gt "$(cat $L/expires 2>/dev/null || echo 0)" ]; then echo free;'
    " else echo held; fi"
)


def wait_for_locks_to_expire(fleet, limit: float = 60) -> None:
    """Wait until no pod holds a lock of a stopped run (it expires a grace after the run's
    last command on that pod)."""
    deadline = time.monotonic() + limit
    while held := [pod for pod in fleet.pods if fleet.out(pod, LOCK_EXPIRED) != "free\n"]:
        assert time.monotonic() < deadline, f"a stopped run's lock never expired on {held}"
        time.sleep(0.2)


NOISE = ("Traceback", "Exception ignored", "KeyboardInterrupt", "Exiting upon user request")


def outcome(sig: int, returncode: int, stdout: str, stderr: str) -> str:
    """How a signalled run ended: "stopped" (podstate's one line, 128 + sig), "killed"
    (SIGKILL) or "finished" (the run's own status, as if no signal had come)."""
    for noise in NOISE:
        assert noise not in stdout + stderr, stdout + stderr
    said = stderr.count("podstate: stopped by")
    if sig == signal.SIGKILL and returncode == -sig:
        return "killed"
    if returncode == 128 + sig:
        assert said == 1, stderr
        last = stderr.strip().splitlines()[-1]
        assert last.startswith(f"podstate: stopped by {signal.Signals(sig).name}"), stderr
        return "stopped"
    assert returncode == 0 and said == 0, (returncode, stderr)
    return "finished"


# When, in a run, the signal is sent: each moment is an event of the run, never a delay.
# - connecting: pyinfra says it connects (podstate's handler is in place by then);
# - mid-run: pod-2 is held by another run's lock and has been probed, so the run is
#   certainly still going when the signal lands, with commands in flight on the others;
# - disconnecting: the run's results are printed and pyinfra disconnects;
# - shutting down: the run is over and Python exits; podstate ignores the signals now.
MOMENTS = {
    "connecting": {"stopped", "killed", "finished"},
    "mid-run": {"stopped", "killed"},
    "disconnecting": {"stopped", "killed", "finished"},
    "shutting down": {"killed", "finished"},
}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_killed_run_leaves_old_or_new_files_and_next_run_converges(
    fleet, states, contents, sig, moment
):
    idle = pod_processes()
    if moment == "mid-run":
        hold_lock("pod-2")
    try:
        before = exec_count(fleet, "pod-2")
        env = {"PODSTATE_LOCK_WAIT": "30"} if moment == "mid-run" else None
        watched = Watched(start_apply(fleet, env=env, vars_dir=states["B"]))
        run = watched.run
        if moment == "connecting":
            watched.wait_for_line("--> Connecting to hosts")
            run.send_signal(sig)
        elif moment == "mid-run":
            wait_for_probe(fleet, "pod-2", before)
            run.send_signal(sig)
        elif moment == "disconnecting":
            watched.wait_for_line("--> Disconnecting from hosts")
            run.send_signal(sig)
        else:
            while (ignoring := ignores(run.pid, signal.SIGINT, signal.SIGTERM)) is False:
                time.sleep(0.001)
            if ignoring:
                run.send_signal(sig)
        returncode, stdout, stderr = watched.finish()
    finally:
        if moment == "mid-run":
            inside.pod_exec("pod-2", "rm -rf /run/podstate.lock")
    ended = outcome(sig, returncode, stdout, stderr)
    assert ended in MOMENTS[moment], (ended, returncode, stderr)
    if ended == "finished":
        assert {pod: fleet.out(pod, FILES) for pod in fleet.pods} == contents["B"]
    wait_until_idle(idle)  # commands the run had already sent finish on the pods
    for pod in fleet.pods:
        assert fleet.out(pod, FILES) in (contents["A"][pod], contents["B"][pod])
        temporary = r"ls -a /etc/profile.d ~ | grep -c '\.podstate\.[A-Za-z0-9]\{6\}$' || true"
        assert fleet.out(pod, temporary) == "0\n"  # no temporary file left behind
    wait_for_locks_to_expire(fleet)
    assert converge(fleet, states["A"]) == contents["A"]


def test_second_run_waits_then_skips_a_locked_pod(fleet, states, contents):
    hold_lock("pod-2")
    try:
        run = start_apply(fleet, vars_dir=states["B"])
        _, stderr = run.communicate(timeout=120)
    finally:
        inside.pod_exec("pod-2", "rm -rf /run/podstate.lock")
    assert run.returncode == 1
    assert "another podstate run holds this pod (ci-job-7)" in stderr
    assert fleet.out("pod-2", FILES) == contents["A"]["pod-2"]
    for pod in ("pod-1", "pod-3", "pod-4", "pod-5"):
        assert fleet.out(pod, FILES) == contents["B"][pod]
        assert fleet.out(pod, "test -e /run/podstate.lock && echo locked || echo free") == "free\n"
    assert converge(fleet, states["A"]) == contents["A"]


def test_expired_lock_is_taken_over(fleet, states, contents):
    hold_lock("pod-2", expires_in=-10)
    assert converge(fleet, states["B"]) == contents["B"]
    assert fleet.out("pod-2", "test -e /run/podstate.lock && echo locked || echo free") == "free\n"
    assert converge(fleet, states["A"]) == contents["A"]


def test_two_runs_at_once_never_interleave(fleet, states, contents, monkeypatch):
    """Both runs find every pod without its profile, so both must change every pod. On each
    pod, either one run's probe waited for the other's lock and both changed it in turn, or
    the later run found that the pod changed after its probe read it, and changed nothing
    there: the pod is then wholly the other run's. (tests/test_lock.py races two runs
    through an operation longer than the lock's grace.)"""
    monkeypatch.setenv("PODSTATE_LOCK_WAIT", "60")
    for pod in fleet.pods:
        fleet.out(pod, "rm /etc/profile.d/podstate.sh")
    names = ("B", "A")
    runs = [start_apply(fleet, vars_dir=states[name]) for name in names]
    results = dict(zip(names, (run.communicate(timeout=180)[1] for run in runs), strict=True))
    stale = {
        name: set(re.findall(r"\[(pod-\d+)\] podstate: skipped: another podstate run changed", err))
        for name, err in results.items()
    }
    for name, err in results.items():
        failed = set(re.findall(r"\[(pod-\d+)\] Error", err))
        assert failed == stale[name], err  # no pod failed for another reason
        assert set(re.findall(r"\[(pod-\d+)\] Success", err)) == set(fleet.pods) - failed
    for pod in fleet.pods:
        assert not (pod in stale["A"] and pod in stale["B"])
        if pod in stale["A"]:
            assert fleet.out(pod, FILES) == contents["B"][pod]
        elif pod in stale["B"]:
            assert fleet.out(pod, FILES) == contents["A"][pod]
        else:
            assert fleet.out(pod, FILES) in (contents["A"][pod], contents["B"][pod])
    assert converge(fleet, states["A"]) == contents["A"]


@pytest.mark.parametrize("fault", ["killed", "frozen"])
def test_pod_dying_mid_run_is_reported_and_others_finish(fleet, states, contents, fault):
    """pod-2's lock is held past the fault, so the run is mid-way on it (probed, the lock
    not yet its) when it dies or hangs, however long the run took to get there; and the
    run would wait for the lock longer than the test allows: only the fault ends pod-2's
    run in time."""
    hold_lock("pod-2")
    before = exec_count(fleet, "pod-2")
    started = time.monotonic()
    run = start_apply(fleet, vars_dir=states["B"], env={"PODSTATE_LOCK_WAIT": "120"})
    wait_for_probe(fleet, "pod-2", before)
    if fault == "killed":
        container.stop_pod("pod-2")
    else:
        freeze("pod-2", signal.SIGSTOP)
    try:
        _, stderr = run.communicate(timeout=90)
    finally:
        if fault == "frozen":
            freeze("pod-2", signal.SIGCONT)
    assert run.returncode == 1
    assert "[pod-2]" in stderr
    assert time.monotonic() - started < 60, "the dead pod was not given up on in time"
    for pod in ("pod-1", "pod-3", "pod-4", "pod-5"):
        assert fleet.out(pod, FILES) == contents["B"][pod]
    restart(fleet, states, contents)


def freeze(pod: str, sig: int) -> None:
    """Send ``sig`` to every process of the pod (its sshd and all its sessions)."""
    freeze_namespace(next(p.pid for p in lifecycle.status() if p.name == pod), sig)


def freeze_namespace(leader: int, sig: int) -> None:
    """Send ``sig`` to every process in the mount namespace of ``leader``."""
    target = os.readlink(f"/proc/{leader}/ns/mnt")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == target:
                os.kill(int(pid), sig)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass


def restart(fleet, states, contents):
    """Bring the whole sandbox back (a pod dies with its namespace) and converge it to A."""
    lifecycle.down()
    lifecycle.up(pods=5)
    assert converge(fleet, states["A"]) == contents["A"]


def test_hung_network_volume_times_out_that_pod_only(fleet, states, contents):
    """pod-1's /workspace (sshfs) stops answering while a dirs path lives on it."""
    fleet.host_vars("pod-1", {"dirs": {"DATA": "/workspace/data"}})
    storage = json.loads((fleet.state / "sandbox.json").read_text())["storage"]["pid"]
    try:
        freeze_namespace(storage, signal.SIGSTOP)
        started = time.monotonic()
        run = apply(fleet)
    finally:
        freeze_namespace(storage, signal.SIGCONT)
        fleet.host_vars("pod-1", None)
    assert run.returncode == 1
    assert time.monotonic() - started < 90
    assert "pod-1" in run.stderr
    assert run.hosts("no_change") >= {"pod-2", "pod-4"}


def test_check_stops_at_once_on_sigterm(fleet):
    """A cancelled CI job: ``podstate check`` ends promptly, with one line (pod-2 hangs, so
    the check is still waiting for it when the signal comes). The signal is sent once the
    check has probed pod-1, so its handlers are in place, however slow its start."""
    freeze("pod-2", signal.SIGSTOP)
    before = exec_count(fleet, "pod-1")
    try:
        check_run = subprocess.Popen(
            [str(BIN / "podstate"), "check"],
            cwd=ROOT,
            env=fleet.env(),
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        wait_for_probe(fleet, "pod-1", before)
        check_run.send_signal(signal.SIGTERM)
        _, stderr = check_run.communicate(timeout=10)
    finally:
        freeze("pod-2", signal.SIGCONT)
    assert check_run.returncode == 128 + signal.SIGTERM
    assert stderr.strip().startswith("podstate: stopped by SIGTERM")
    assert "\n" not in stderr.strip()


def test_network_volume_gone_fails_that_pod_only(fleet, states, contents):
    """pod-1's sshfs dies (the volume is gone) while a dirs path lives on it."""
    fleet.host_vars("pod-1", {"dirs": {"DATA": "/workspace/data"}})
    record = json.loads((fleet.state / "pods.json").read_text())["pod-1"]
    os.kill(record["sshfs_pid"], signal.SIGKILL)
    try:
        started = time.monotonic()
        run = apply(fleet)
    finally:
        fleet.host_vars("pod-1", None)
    assert run.returncode == 1
    assert time.monotonic() - started < 60
    assert "pod-1" in run.stderr
    assert run.hosts("no_change") >= {"pod-2", "pod-4"}
    restart(fleet, states, contents)
