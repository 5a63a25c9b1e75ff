"""The pod lock (scripts/lock.sh) under contention: never two holders, held for a whole run.

The first tests run the lock's own shell on this machine, as many takers at once as a fleet
of runs would be, and a probe racing a live keeper; the last race two applies through real
SSH on sandbox pods, the first holding the lock through a deploy-file operation that lasts
longer than the grace, and check and watch a pod while another run holds it (busy).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jsonschema
from junitparser import JUnitXml, Skipped

from podstate.shell import script
from tests.conftest import cannot_run_e2e
from tests.e2e import BIN, ROOT, check, run, start_apply
from tests.test_deploy_dir import copy_project

LOCK_SH = script("lock.sh")
TAKERS = 12
ROUNDS = 9  # three of each start
# Inside the lock, a taker makes a directory that only one process can hold: a second
# taker inside at the same time finds it there, and says so.
INSIDE = (
    'mkdir "$D/inside" 2>/dev/null || echo overlap >>"$D/log"; echo "in $T" >>"$D/log"; '
    'sleep 0.02; rmdir "$D/inside"'
)


def lock(*args: str | int, env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    """Start scripts/lock.sh with ``args``, as a pod runs it."""
    return subprocess.Popen(
        ["sh", "-c", LOCK_SH, "lock", *map(str, args)],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def lock_run(
    path: Path,
    token: str,
    command: str = ":",
    *,
    mode: str = "take",
    wait: int = 60,
    end: str = "release",
    grace: int = 3,
    seen: str = "",
    env: dict[str, str] | None = None,
):
    return lock(
        "run", path, token, f"owner {token}", mode, 60, wait, grace, end, seen, command, env=env
    )


def set_lock(path: Path, token: str, expires: int | None, age: int = 0) -> None:
    """Make ``path`` a lock of another run: expiring at ``expires`` (None: never written),
    made ``age`` seconds ago; beside its mutex, which every run that takes a lock makes."""
    Path(f"{path}.mutex").touch()
    path.mkdir()
    (path / "token").write_text(token + "\n")
    (path / "owner").write_text(f"owner {token}\n")
    if expires is not None:
        (path / "expires").write_text(f"{expires}\n")
    if age:
        then = time.time() - age
        os.utime(path, (then, then))


# How each round finds the lock: free, held by a run whose lock expired, or left half-made
# by a run killed while taking it (no expiry written) long ago.
STARTS = [
    lambda p: None,
    lambda p: set_lock(p, "dead", expires=int(time.time()) - 5),
    lambda p: set_lock(p, "torn", expires=None, age=300),
]


def test_the_locks_clock_asks_date_once_and_keeps_the_boots_time_beside_the_lock(tmp_path):
    """The lock's clock is the time since boot plus the boot's time, which date(1) gives once
    and the lock keeps with the boot's id (LOCK.clock); a kept time of another boot, or one
    cut short, is not used. Each take here writes ``now`` to a file, as the lock reads it."""
    calls = tmp_path / "date-calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("date")
    (fake / "date").write_text(f'#!/bin/sh\necho called >>{calls}\nexec {real} "$@"\n')
    (fake / "date").chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}"}
    path = tmp_path / "podstate.lock"
    clock = Path(f"{path}.clock")

    def take() -> int:
        done = lock_run(path, "t", 'echo "$now" >"$D/now"', env={**env, "D": str(tmp_path)})
        _, err = done.communicate(timeout=30)
        assert done.returncode == 0, err
        read = int((tmp_path / "now").read_text())
        assert abs(read - time.time()) <= 2, read
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    assert take() == 1
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert clock.read_text().split()[0] == boot_id
    assert clock.read_text().endswith(" .\n")
    assert take() == 1  # kept: no date
    assert take() == 1
    words = clock.read_text().split()
    for spoiled in (f"another-boot {' '.join(words[1:])}\n", " ".join(words[:3]) + "\n"):
        clock.write_text(spoiled)
        before = len(calls.read_text().splitlines())
        assert take() == before + 1  # not used: date again, and kept again
        assert clock.read_text().split()[0] == boot_id


def test_many_takers_of_one_lock_never_hold_it_at_once(tmp_path):
    for n in range(ROUNDS):
        directory = tmp_path / f"round{n}"
        directory.mkdir()
        path = directory / "podstate.lock"
        STARTS[n % len(STARTS)](path)
        # The takers start together: each waits for a line of the gate, all written at once.
        os.mkfifo(directory / "gate")
        gate = os.open(directory / "gate", os.O_RDWR)
        names = [f"t{n}-{i}" for i in range(TAKERS)]
        takers = [
            subprocess.Popen(
                ["sh", "-c", 'read -r _ <"$D/gate" && exec sh -c "$0" lock "$@"', LOCK_SH]
                + [str(a) for a in ("run", path, name, name, "take", 60, 60, 3, "release", "")]
                + [INSIDE],
                env={**os.environ, "D": str(directory), "T": name},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in names
        ]
        os.write(gate, b"go\n" * TAKERS)
        results = [t.communicate(timeout=120) for t in takers]
        os.close(gate)
        assert [t.returncode for t in takers] == [0] * TAKERS, results
        log = (directory / "log").read_text().splitlines()
        assert "overlap" not in log, (n, log)
        assert sorted(log) == sorted(f"in {name}" for name in names), (n, log)
        assert not path.exists()  # the last taker released it


def taken(path: Path, token: str, alive) -> None:
    """Wait until ``token`` holds the lock at ``path`` (``alive()``: its run has not ended)."""
    deadline = time.monotonic() + 60
    while not (path / "token").exists() or (path / "token").read_text() != f"{token}\n":
        assert time.monotonic() < deadline and alive(), "the lock was never taken"
        time.sleep(0.05)


def under_sshd(tmp_path: Path) -> str:
    """Return a shell whose process is named sshd: the SSH session a test suite may itself
    run in, which the lock must not take for the run's connection."""
    sshd = tmp_path / "sshd"
    sshd.symlink_to(shutil.which("sh"))
    return str(sshd)


def test_a_live_run_keeps_its_lock_past_the_grace_and_loses_it_when_it_ends(tmp_path):
    """The run's lock.sh runs in a session of its own, as sshd starts a command, below a
    process that stands for the run's SSH connection (it lives until its pipe ends); all of
    it under a process named sshd that outlives that connection, as the SSH session this
    suite may run in does: the lock is bound to the connection, however the suite runs."""
    path = tmp_path / "podstate.lock"
    pipe = tmp_path / "connection"  # the connection lives until this pipe ends
    os.mkfifo(pipe)
    connection = 'setsid sh -c "$0" lock run "$1" run-a "owner run-a" take 60 5 3 keep "" : && cat'
    holder = subprocess.Popen(
        [under_sshd(tmp_path), "-c", f'sh -c "$0" "$@" <"{pipe}"; exec cat', connection,
         LOCK_SH, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    connection_end = open(pipe, "w")  # closed below: the connection ends
    try:
        taken(path, "run-a", lambda: holder.poll() is None)
        first = int((path / "expires").read_text())
        while int(time.time()) <= first + 1:  # the grace the command left has long passed
            time.sleep(0.2)
        busy = lock_run(path, "run-b", wait=1)
        _, err = busy.communicate(timeout=30)
        assert busy.returncode == 75
        assert "another podstate run holds this pod (owner run-a)" in err
        assert int((path / "expires").read_text()) > first  # the keeper renewed it
        connection_end.close()  # the connection ends; the lock expires a grace later
        taker = lock_run(path, "run-b", 'cat "$L/token"', wait=30, env={"L": str(path)})
        out, err = taker.communicate(timeout=60)
        assert taker.returncode == 0, err
        assert out == "run-b\n"
    finally:
        connection_end.close()  # however the test ended: no keeper outlives it
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_probe_racing_a_live_keeper_never_reads_its_lock_as_free(tmp_path):
    """The keeper rewrites ``expires`` every second. Its run is traced with every write held
    back 0.3 s, so that each rewrite leaves the file empty that long; a probe reading the
    lock over and over while it renews three times must find it held every time."""
    path = tmp_path / "podstate.lock"
    holder = subprocess.Popen(
        ["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=write",
         "-e", "inject=write:delay_enter=300000",
         "sh", "-c", LOCK_SH, "lock", "run", str(path), "run-a", "owner run-a", "take", "60",
         "5", "3", "keep", "", ":"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    stop = tmp_path / "stop"
    reader = None
    try:
        taken(path, "run-a", lambda: holder.poll() is None)
        reader = probe_lock_lines(path, wait=0, loop_until=stop)
        for _ in range(4):  # the keeper's renewals, each read as it stands under the mutex
            renewed(path, holder)
        stop.touch()
        out = reader.communicate(timeout=60)[0].splitlines()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        if reader is not None and reader.poll() is None:
            reader.kill()
    reads = [line for line in out if line.startswith("lock ")]
    assert reads and all(line.endswith(" held") for line in reads), [
        line for line in reads if not line.endswith(" held")
    ][:5]
    assert set(out) - set(reads) == {"lock.owner owner run-a"}


def test_a_probe_racing_takes_and_releases_reads_each_count_whole(tmp_path):
    """With no lock there, the probe reads the count of takes without the mutex, before it finds
    the lock missing. Eight runs take and release the lock one after another, each traced
    with every write held back 50 ms, so that each rewrite of the count or the expiry leaves
    its file empty that long. A probe reads the lock over and over meanwhile, into the file
    each run marks too once it holds the lock, and again before it releases it, having waited
    for the probe to find it held. Between those marks the probe never finds it free; every
    count it reads is whole and never less than the one before."""
    path = tmp_path / "podstate.lock"
    stop, out = tmp_path / "stop", tmp_path / "reads"
    inside = (
        'echo "inside $N" >>"$F"; i=0; until grep -qx "lock $N held" "$F" || [ $i = 1000 ];'
        ' do sleep 0.01; i=$((i + 1)); done; echo "outside $N" >>"$F"'
    )
    with open(out, "a") as sink:  # appended to by the probe and the runs alike
        reader = probe_lock_lines(path, wait=0, loop_until=stop, stdout=sink)
    try:
        for n in range(1, 9):
            taker = subprocess.Popen(
                ["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=write",
                 "-e", "inject=write:delay_enter=50000",
                 "sh", "-c", LOCK_SH, "lock", "run", str(path), f"run-{n}", f"owner run-{n}",
                 "take", "60", "60", "3", "release", "", inside],
                env={**os.environ, "N": str(n), "F": str(out)},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            assert taker.wait(timeout=60) == 0
        deadline = time.monotonic() + 60
        while "lock 8 free\n" not in out.read_text():  # the reader has seen the last release
            assert time.monotonic() < deadline and reader.poll() is None, out.read_text()[-500:]
            time.sleep(0.05)
        stop.touch()
        assert reader.wait(timeout=60) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
    held, free, window = set(), [], None
    for line in out.read_text().splitlines():
        word, _, rest = line.partition(" ")
        if word in ("inside", "outside"):
            window = rest if word == "inside" else None
        elif word == "lock":
            count, state = rest.split(" ")
            assert count.isdigit() and state in ("held", "free"), line
            assert not (state == "free" and count == window), f"{line} while run {window} held it"
            if state == "held" and count == window:
                held.add(count)
            if state == "free":
                free.append(int(count))
    assert held == {str(n) for n in range(1, 9)}  # each run's lock was read, held
    assert free == sorted(free) and set(free) <= set(range(9)), free


def renewed(path: Path, holder: subprocess.Popen) -> None:
    """Wait until the keeper has renewed the lock at ``path``: its expiry, read under the
    lock's mutex as every reader reads it, has moved."""

    def expires() -> str:
        with open(f"{path}.mutex") as mutex:
            fcntl.flock(mutex, fcntl.LOCK_SH)
            return (path / "expires").read_text()

    before = expires()
    deadline = time.monotonic() + 60
    while expires() == before:
        assert time.monotonic() < deadline and holder.poll() is None, "no renewal"
        time.sleep(0.05)


def test_only_the_holder_renews_or_releases(tmp_path):
    path = tmp_path / "podstate.lock"
    set_lock(path, "holder", expires=int(time.time()) + 600)
    other = lock("release", path, "intruder")
    other.communicate(timeout=30)
    assert (path / "token").read_text() == "holder\n"
    hold = lock_run(path, "intruder", "echo ran", mode="hold", wait=1)
    out, err = hold.communicate(timeout=30)
    assert hold.returncode == 75
    assert "ran" not in out
    assert err.strip() == (
        "podstate: this run no longer holds the pod lock (owner holder does); it stops on this pod"
    )
    assert (path / "token").read_text() == "holder\n"
    mine = lock("release", path, "holder")
    mine.communicate(timeout=30)
    assert not path.exists()


def test_a_step_that_finds_its_lock_taken_over_stops(tmp_path):
    """The run's lock is valid for 1 s (its TTL); the step outlasts it, and another run
    takes the lock over, as it may once it has expired."""
    path = tmp_path / "podstate.lock"
    steps = (
        'echo one; rm -rf "$0"; mkdir "$0"; echo thief >"$0/token"; echo thief >"$0/owner"; '
        "renew 10 || exit; echo two"
    )
    run = lock(
        "run",
        path,
        "mine",
        "owner mine",
        "take",
        1,
        5,
        3,
        "keep",
        "",
        steps.replace("$0", str(path)),
    )
    out, err = run.communicate(timeout=30)
    assert run.returncode == 75
    assert out.split() == ["one"]
    assert "no longer holds the pod lock (thief does)" in err
    assert (path / "token").read_text() == "thief\n"  # the holder's lock stays


def test_a_lock_path_that_cannot_be_used_fails_at_once_with_one_line(tmp_path):
    missing = lock_run(tmp_path / "gone" / "podstate.lock", "t", wait=600)
    _, err = missing.communicate(timeout=30)
    assert missing.returncode == 73
    assert err.strip() == (
        f"podstate: cannot take the pod lock {tmp_path}/gone/podstate.lock: "
        f"{tmp_path}/gone does not exist"
    )
    if os.geteuid() != 0:
        cannot_run_e2e("the rest of this test needs root (a read-only mount, another user)")
    readonly = tmp_path / "ro"
    readonly.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "ro", str(readonly)], check=True)
    try:
        ro = lock_run(readonly / "podstate.lock", "t", wait=600)
        _, err = ro.communicate(timeout=30)
    finally:
        subprocess.run(["umount", str(readonly)], check=True)
    assert ro.returncode == 73
    assert err.strip() == (
        f"podstate: cannot take the pod lock {readonly}/podstate.lock: {readonly} is read-only"
    )
    with tempfile.TemporaryDirectory() as shared:  # where another user can look, not write
        os.chmod(shared, 0o755)
        _as_nobody(Path(shared))


def _as_nobody(shared: Path) -> None:
    user = lock(
        "run",
        shared / "podstate.lock",
        "t",
        "o",
        "take",
        60,
        600,
        3,
        "release",
        "",
        ":",
        preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)),
    )
    _, err = user.communicate(timeout=30)
    assert user.returncode == 73
    assert err.strip().endswith(
        f"{shared} is not writable by nobody: podstate runs as root (ssh_user: root)"
    ), err


def test_a_take_after_another_run_took_the_lock_since_the_probe_changes_nothing(tmp_path):
    path = tmp_path / "podstate.lock"
    Path(f"{path}.gen").write_text("6\n")  # the probe read 5; another run took it since
    stale = lock_run(path, "late", "echo ran", seen="5")
    out, err = stale.communicate(timeout=30)
    assert stale.returncode == 75 and "ran" not in out
    assert "another podstate run changed this pod while this run was reading it" in err
    held = lock_run(path, "late", "echo ran", seen="held")  # the probe found it held
    assert held.communicate(timeout=30)[0] == "" and held.returncode == 75
    current = lock_run(path, "late", "echo ran", seen="6")
    assert current.communicate(timeout=30)[0] == "ran\n" and current.returncode == 0
    assert Path(f"{path}.gen").read_text() == "7\n"  # each take counts


def probe_lock_lines(
    path: Path, wait: int, loop_until: Path | None = None, stdout: Any = subprocess.PIPE
) -> subprocess.Popen:
    """Start the probe's lock lines (podstate.facts.probe) against the lock at ``path``, once,
    or over and over until ``loop_until`` exists, printing to ``stdout``. The probe's program
    is built in a process of its own: importing pyinfra's API patches the standard library
    with gevent, which other test modules' threads must not meet."""
    lines = subprocess.run(
        [
            sys.executable,
            "-c",
            "from podstate.facts.probe import program; "
            f"print(program(paths=[], files=[], lock_wait={wait}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    start = lines.index("L=/run/podstate.lock")
    end = max(i for i, line in enumerate(lines) if '"lock ' in line)
    program = "\n".join([f"L={path}", *lines[start + 1 : end + 1]])
    if loop_until is not None:
        program = f'while [ ! -e "{loop_until}" ]; do\n{program}\ndone'
    return subprocess.Popen(["sh", "-c", program], stdout=stdout, text=True)


def sleeping(pid: int) -> bool:
    """Return whether process ``pid`` has a ``sleep`` child: the probe is in its wait."""
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (OSError, ValueError):
            continue
        comm, _, rest = stat.partition("(")[2].rpartition(")")
        if comm == "sleep" and int(rest.split()[1]) == pid:
            return True
    return False


def test_the_probe_waits_for_another_runs_live_lock_then_reads_the_pod(tmp_path):
    path = tmp_path / "podstate.lock"
    set_lock(path, "other", expires=int(time.time()) + 600)
    Path(f"{path}.gen").write_text("3\n")
    check = probe_lock_lines(path, wait=0)  # a check does not wait
    assert check.communicate(timeout=30)[0] == "lock 3 held\nlock.owner owner other\n"
    apply = probe_lock_lines(path, wait=60)
    deadline = time.monotonic() + 30
    while not sleeping(apply.pid):  # it waits while the lock is held ...
        assert time.monotonic() < deadline and apply.poll() is None, apply.communicate()
        time.sleep(0.01)
    subprocess.run(["rm", "-rf", str(path)], check=True)
    assert apply.communicate(timeout=30)[0] == "lock 3 free\n"  # ... and reads once it is free
    set_lock(path, "killed", expires=int(time.time()) - 1)  # an expired lock is no one's
    assert probe_lock_lines(path, wait=60).communicate(timeout=30)[0] == "lock 3 free\n"


# End to end: a team's deploy file whose operation outlasts the grace, on sandbox pods.
SANDBOX = {"pods": 2}
SLOW = '''"""A team's operation that takes longer than the lock's grace."""
from pyinfra.operations import server

server.shell(
    name="Slow team step",
    commands=[
        "mkdir /root/inside 2>/dev/null || echo overlap >> /root/race.log; "
        "echo start $(cat /run/podstate.lock/token) >> /root/race.log; "
        "sleep 8; echo end >> /root/race.log; rmdir /root/inside"
    ],
)
'''


def test_an_apply_holds_the_lock_through_a_long_operation_raced_by_another(fleet, tmp_path):
    project = copy_project(tmp_path / "project")
    (project / "deploy" / "zz-slow.py").write_text(SLOW)
    for pod in fleet.pods:
        fleet.out(pod, "rm -f /root/race.log")
    env = {"PODSTATE_LOCK_GRACE": "3", "PODSTATE_LOCK_WAIT": "90"}
    first = start_apply(fleet, env=env, cwd=project, deploys=("deploy/pod.py", "deploy/zz-slow.py"))
    deadline = time.monotonic() + 120
    while "start" not in fleet.out("pod-1", "cat /root/race.log 2>/dev/null || true"):
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.1)
    second = start_apply(
        fleet, env=env, cwd=project, deploys=("deploy/pod.py", "deploy/zz-slow.py")
    )
    results = [run.communicate(timeout=300) for run in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], results
    for pod in fleet.pods:
        log = fleet.out(pod, "cat /root/race.log").split("\n")
        assert "overlap" not in log, (pod, log)
        starts = [line for line in log if line.startswith("start ")]
        assert len(starts) == 2 and starts[0] != starts[1], (pod, log)  # two runs' tokens
        assert [line.split()[0] for line in log if line] == ["start", "end", "start", "end"]
        assert fleet.ssh(pod, "test -e /run/podstate.lock").returncode == 1


GATED = '''"""A team's operation that runs until the test opens its gate (/root/go on the pod)."""
from pyinfra.operations import server

server.shell(
    name="Gated team step",
    commands=["echo start >> /root/gated.log; while [ ! -e /root/go ]; do sleep 0.1; done"],
)
'''


def test_a_pod_another_run_is_changing_is_busy_in_every_report_and_the_watch_skips_it(
    fleet, tmp_path
):
    """A real second run holds each pod: an apply inside a team operation that waits for the
    test. The check says so (busy, with that run's owner line; exit 2: check again later) in
    every report, and the watch leaves those pods alone for its pass."""
    project = copy_project(tmp_path / "project")
    (project / "deploy" / "zz-gated.py").write_text(GATED)
    for pod in fleet.pods:
        fleet.out(pod, "rm -f /root/go /root/gated.log")
    first = start_apply(fleet, cwd=project, deploys=("deploy/pod.py", "deploy/zz-gated.py"))
    try:
        deadline = time.monotonic() + 120
        for pod in fleet.pods:  # each pod's apply is inside the gated step, holding the lock
            while "start" not in fleet.out(pod, "cat /root/gated.log 2>/dev/null || true"):
                assert time.monotonic() < deadline and first.poll() is None, first.communicate()
                time.sleep(0.1)
        files = {kind: tmp_path / f"check.{kind}" for kind in ("json", "md", "xml")}
        result = check(
            fleet,
            *("--json", str(files["json"]), "--markdown", str(files["md"])),
            *("--junit", str(files["xml"])),
            cwd=project,
        )
        watch = run(
            fleet,
            [str(BIN / "podstate"), "watch", "--once", "--json"]
            + ["--deploy", "deploy/pod.py", "--deploy", "deploy/zz-gated.py"],
            cwd=project,
        )
    finally:
        for pod in fleet.pods:
            fleet.out(pod, "touch /root/go")
        applied = first.communicate(timeout=300)
    assert first.returncode == 0, applied
    assert result.returncode == 2, result.stdout + result.stderr
    document = json.loads(files["json"].read_text())
    jsonschema.validate(
        document, json.loads((ROOT / "schema/check-report.schema.json").read_text())
    )
    holder = f"{socket.gethostname()} pid {first.pid} since "
    for pod in fleet.pods:
        entry = document["pods"][pod]
        assert entry["status"] == "busy", entry
        assert entry["holder"].startswith(holder), entry
        assert f"{pod}  busy" in result.stdout
        assert f"| {pod} | busy | another podstate run is changing it ({holder}" in (
            files["md"].read_text()
        )
    assert document["summary"]["busy"] == 2 and document["summary"]["exit_code"] == 2
    skipped = [
        case.name
        for suite in JUnitXml.fromfile(str(files["xml"]))
        for case in suite
        if any(isinstance(r, Skipped) and r.message.startswith("busy: ") for r in case.result)
    ]
    assert skipped == ["podstate check"] * 2
    events = [json.loads(line) for line in watch.stdout.splitlines()]
    assert {e["pod"]: e["result"] for e in events if e["seen"] == "busy"} == {
        pod: "skipped" for pod in fleet.pods
    }, events
    assert not [e for e in events if e["action"] == "apply"], events
    assert watch.returncode == 2, watch.stdout + watch.stderr
