"""In use or idle, now: the probe's GPU utilization, memory in use, compute processes and
interactive sessions, and the rule that makes a pod idle (any unknown reading: null).

The rule on data; end to end on sandbox pods whose nvidia-smi stand-in is made busy or given
a compute process, and with a terminal open over SSH. Idle is one probe, as before: a check
of an idle GPU pod asks nvidia-smi once (tests/test_pod_work.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from podstate.facts import activity
from podstate.facts.gpu import GpuDevice, GpuState, parse_apps, parse_gpu_query
from podstate.facts.probe import Probe, parse_probe
from podstate.facts.sessions import Session
from podstate.facts.work import Sign, Unread, Work
from podstate.sandbox import inside
from podstate.sandbox.api import list_pods
from tests.e2e import check

SANDBOX = {"pods": 1}
POD = "pod-1"  # two GPUs


QUIET = Work(age=0.0)


def _probe(*devices: GpuDevice, apps=(), sessions=(), readable=True, work=QUIET) -> Probe:
    return replace(
        parse_probe([]),
        gpu=GpuState(readable=readable, devices=devices, apps=apps, error="NVML failed"),
        sessions=tuple(sessions),
        work=work,
    )


IDLE_GPU = GpuDevice(0, uuid="GPU-a", utilization=0, memory_used_mib=0)


def test_a_pod_is_idle_only_when_every_reading_says_so():
    assert activity.read(_probe(IDLE_GPU, IDLE_GPU))["idle"] is True
    busy = GpuDevice(1, uuid="GPU-b", utilization=3, memory_used_mib=0)
    assert activity.read(_probe(IDLE_GPU, busy))["in_use"] == ["GPU 1 at 3 %"]
    loaded = GpuDevice(0, uuid="GPU-a", utilization=0, memory_used_mib=30000)
    assert activity.read(_probe(loaded))["idle"] is False  # a model waiting for requests
    session = Session(pid=7, kind="kernel", command="python3")
    assert activity.read(_probe(IDLE_GPU, sessions=[session]))["idle"] is False


def test_processes_that_worked_make_the_pod_in_use_and_the_period_is_dated_on_the_pod():
    from datetime import UTC, datetime

    now = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
    quiet = activity.read(_probe(IDLE_GPU, work=replace(QUIET, age=90.5)), now)
    assert (quiet["idle"], quiet["idle_for"], quiet["idle_since"]) == (
        True,
        90.5,
        "2026-06-01T11:58:59Z",
    )
    cpu = Sign(kind="cpu", pid=812, command="python", amount=170)
    found = activity.read(_probe(IDLE_GPU, work=replace(QUIET, busy=(cpu,))), now)
    assert found["in_use"] == ["1.7 s of CPU since the idle period began, most by python (pid 812)"]
    unread = replace(QUIET, unread=(Unread(pid=9, command="sleep"),))
    assert activity.read(_probe(IDLE_GPU, work=unread))["idle"] is None
    unkept = activity.read(_probe(IDLE_GPU, work=replace(QUIET, age=None)))
    assert unkept["idle"] is None and unkept["idle_since"] is None


def test_the_work_lines_parse():
    from podstate.facts import work

    found = work.parse(
        [
            "work.busy io 7 =curl 3355443",
            "work.busy gone 8 =",
            "work.busy run 10 =python",
            "work.unread 9 =sleep",
            "work.age 1234",
        ]
    )
    assert found.age == 12.34
    assert work.describe(found.busy[0]) == (
        "3.2 MiB read and written since it began, most by curl (pid 7)"
    )
    assert work.describe(found.busy[1]) == "process 8 ended since the idle period began"
    assert work.describe(found.busy[2]) == (
        "process python (pid 10) is running on a CPU (or waiting on a disk) now"
    )
    assert found.unread == (Unread(pid=9, command="sleep"),)
    assert work.parse(["work.unkept", "work.age 0"]).age is None
    assert work.parse([]).age is None  # the section did not answer: unknown


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_a_process_gone_while_it_was_read_is_gone_and_the_shell_goes_on(shell, tmp_path):
    """A process that ended between the listing of /proc and the reading of its files has
    none left to read: work_stat says so, work_gone takes it for ended, and the shell goes
    on (it once stopped there, with an arithmetic error)."""
    from podstate.shell import script

    gone = subprocess.Popen(["true"])
    gone.wait()
    program = "\n".join(
        [
            script("enc.sh"),
            script("work.sh"),
            f"work_stat {gone.pid}; echo $?",
            f"work_gone {gone.pid}; echo $?",
        ]
    )
    done = subprocess.run([shell, "-c", program], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "1\n0\n", "")


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_a_process_in_its_exit_is_gone_not_another_containers(shell, tmp_path):
    """A process in its exit lets go of its namespaces and files before it is a zombie: one
    of another container caught there cannot be told from this container's unreadable
    process by them, but its flags say it is exiting (PF_EXITING): it is its end, neither
    work nor unknown. The kernel's window is too short to catch, so a live process's stat
    line is stood in for, in a mount namespace of the test's own, by the same line with
    that flag; the live process itself is not gone."""
    from podstate.shell import script

    if os.geteuid() != 0:
        pytest.skip("a bind mount over /proc needs root")
    live = subprocess.Popen(["sleep", "600"])
    try:
        comm, fields = Path(f"/proc/{live.pid}/stat").read_text().rsplit(") ", 1)
        _, *rest = fields.split(" ")
        rest[5] = str(int(rest[5]) | 4)  # flags: PF_EXITING
        exiting = tmp_path / "stat"
        exiting.write_text(f"{comm}) {' '.join(['R', *rest])}")
        program = "\n".join(
            [
                script("enc.sh"),
                script("work.sh"),
                f"work_stat {live.pid}; echo $w_run; work_gone {live.pid}; echo $?",
                "work_gone $$; echo $?",
            ]
        )
        stood_in = f'mount --bind {exiting} /proc/{live.pid}/stat && exec {shell} -c "$0"'
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", stood_in, program],
            capture_output=True,
            text=True,
        )
    finally:
        live.kill()
        live.wait()
    assert (done.returncode, done.stdout, done.stderr) == (0, "R\n0\n1\n", "")


@pytest.mark.parametrize(
    "probe",
    [
        _probe(GpuDevice(0, utilization=None, memory_used_mib=0)),
        _probe(GpuDevice(0, utilization=0, memory_used_mib=None)),
        _probe(IDLE_GPU, apps=None),  # the process list could not be read
        _probe(readable=False),
    ],
)
def test_any_unknown_reading_is_never_idle(probe):
    assert activity.read(probe)["idle"] is None


def test_a_utilization_outside_0_to_100_is_unknown():
    (gpu,) = parse_gpu_query("0, 140, 0", ("index", "utilization.gpu", "memory.used"))
    assert gpu.utilization is None and gpu.memory_used_mib == 0


def test_compute_processes_parse_and_a_failed_list_is_unknown():
    (app,) = parse_apps("0", "GPU-b, 4242, python3, 2048\n")
    assert (app.gpu_uuid, app.pid, app.name, app.memory_mib) == ("GPU-b", 4242, "python3", 2048)
    assert parse_apps("0", "") == ()
    assert parse_apps("6", "No devices were found") is None


def _entry(fleet, tmp_path) -> dict:
    report = tmp_path / "r.json"
    result = check(fleet, "--json", str(report))
    assert report.exists(), result.stdout + result.stderr
    entry = json.loads(report.read_text())["pods"][POD]
    entry["table"] = result.stdout
    return entry


@pytest.fixture
def quiet(fleet):
    """POD with idle GPUs, after the test too."""
    inside.gpus_idle(POD)
    yield
    inside.gpus_idle(POD)


def test_an_untouched_gpu_pod_is_idle_now(fleet, quiet, tmp_path):
    entry = _entry(fleet, tmp_path)
    assert entry["idle"] is True, entry["activity"]
    assert "idle now" in entry["table"]
    assert [g["utilization"] for g in entry["activity"]["gpus"]] == [0, 0]


def test_a_busy_gpu_makes_the_pod_in_use(fleet, quiet, tmp_path):
    inside.gpu_busy(POD, index=1, percent=87)
    entry = _entry(fleet, tmp_path)
    assert entry["idle"] is False
    assert "in use: GPU 1 at 87 %" in entry["table"]
    (listed,) = list_pods(fleet.state)["pods"]  # and RunPod's live numbers say so too
    assert listed["runtime"]["gpus"] == [
        {"util": 0, "memoryUtil": 0},
        {"util": 87, "memoryUtil": 0},
    ]


def test_a_compute_process_makes_the_pod_in_use_and_is_named(fleet, quiet, tmp_path):
    inside.compute_process(POD, index=0, pid=4242, command="vllm", memory_mib=30000)
    entry = _entry(fleet, tmp_path)
    assert entry["idle"] is False
    (gpu0, gpu1) = entry["activity"]["gpus"]
    assert gpu0["processes"] == [{"pid": 4242, "name": "vllm"}] and gpu1["processes"] == []
    assert gpu0["memory_used_mib"] == 30000


def test_an_open_terminal_makes_the_pod_in_use(fleet, quiet, tmp_path):
    from podstate.sandbox import ssh

    *options, host = ssh.ssh_command(POD)
    terminal = subprocess.Popen(
        [*options, "-tt", host, "echo open; exec sleep 600"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert terminal.stdout.readline().strip() == "open"  # the session is there
        entry = _entry(fleet, tmp_path)
    finally:
        terminal.kill()
        terminal.wait()
        _end(fleet, "sleep 600")
    assert entry["idle"] is False
    (session,) = entry["activity"]["sessions"]
    assert session["kind"] == "tty"


def test_an_unreadable_gpu_is_unknown_never_idle(fleet, quiet, tmp_path):
    inside.gpu_fault(POD, "nvml-mismatch")
    try:
        entry = _entry(fleet, tmp_path)
    finally:
        inside.pod_exec(POD, f"sed -i '/^fail|/d' {inside.GPU_LAYOUT}")
    assert entry["idle"] is None, (entry["table"], entry["activity"])
    assert "idle unknown (unread: the GPUs: Failed to initialize NVML" in entry["table"]


# --- work that no GPU reading sees: the pod's processes over its idle period ----------------


def _end(fleet, pattern: str) -> None:
    """End the pod's processes whose command line has ``pattern``, and wait until they are
    gone (``[x]rest`` matches them, not this command's own line)."""
    match = f"[{pattern[0]}]{pattern[1:]}"
    fleet.out(POD, f"pkill -f '{match}'; while pgrep -f '{match}' >/dev/null; do sleep 0.1; done")


def _quiet_entry(fleet, tmp_path) -> dict:
    """Return the check's entry once a check found the pod idle: the checks before it begin
    the pod's idle period anew for what earlier tests left (processes that ended)."""
    for _ in range(3):
        entry = _entry(fleet, tmp_path)
        if entry["idle"] is True:
            return entry
    raise AssertionError(entry["activity"])


def _started(fleet, command: str) -> str:
    """Start ``command`` on the pod over SSH, detached from the session (its stdio closed),
    and return its pid."""
    return fleet.out(POD, f"{command} </dev/null >/dev/null 2>&1 & echo $!").strip()


@pytest.mark.parametrize("detach", ["nohup", "setsid"])
def test_a_cpu_only_job_keeps_the_pod_in_use(fleet, quiet, tmp_path, detach):
    _quiet_entry(fleet, tmp_path)
    pid = _started(fleet, f"{detach} sh -c 'while :; do :; done'")
    try:
        started = _entry(fleet, tmp_path)  # a process started since the period began
        assert started["idle"] is False
        assert f"process sh (pid {pid}) started since the idle period began" in str(
            started["activity"]["in_use"]
        )
        fleet.out(POD, f"until [ $(cut -d' ' -f14 /proc/{pid}/stat) -gt 150 ]; do :; done")
        working = _entry(fleet, tmp_path)  # its CPU since the new period began
    finally:
        _end(fleet, "while :")
    assert working["idle"] is False, working["activity"]
    (cpu,) = [why for why in working["activity"]["in_use"] if "of CPU" in why]
    assert cpu.endswith(f"most by sh (pid {pid})")
    assert (
        "in use:" in working["table"] and "of CPU since the idle period began" in working["table"]
    )
    assert working["activity"]["idle_for"] == 0  # the pod's period begins again


def test_a_running_ssh_command_keeps_the_pod_in_use(fleet, quiet, tmp_path):
    from podstate.sandbox import ssh

    _quiet_entry(fleet, tmp_path)
    *options, host = ssh.ssh_command(POD)
    command = subprocess.Popen(
        [*options, host, "echo open; exec sleep 601"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert command.stdout.readline().strip() == "open"  # no terminal: not a tty session
        entry = _entry(fleet, tmp_path)
    finally:
        command.kill()
        command.wait()
        _end(fleet, "sleep 601")
    assert entry["idle"] is False
    assert entry["activity"]["sessions"] == []
    assert any(why.startswith("SSH session: sleep (pid") for why in entry["activity"]["in_use"])


# The pod's sshd sessions other than the command's own (children of its listener), the
# newest last; and a wait until none of SESSION's sockets is an established TCP connection
SESSIONS = "ps -o pid= --sort=start_time --ppid $(ps -o ppid= -p $PPID) | grep -vw $PPID; true"
GONE = (
    "inos=' '; for f in /proc/{pid}/fd/*; do [ -S $f ] &&"
    " inos=\"$inos$(sed -n 's/^ino:[[:space:]]*//p' /proc/{pid}/fdinfo/${{f##*/}}) \"; done;"
    ' while awk -v i="$inos" \'$4 == "01" && index(i, " " $10 " ") {{f = 1}}'
    " END {{exit !f}}' /proc/net/tcp /proc/net/tcp6; do sleep 0.05; done"
)


def _session(fleet, *args: str) -> tuple[subprocess.Popen, str]:
    """Open an SSH session to the pod with ``args`` (ssh's options and command), once it is
    there: return its client and the pid of its sshd on the pod."""
    from podstate.sandbox import ssh

    *options, host = ssh.ssh_command(POD)
    before = set(fleet.out(POD, SESSIONS).split())
    client = subprocess.Popen([*options, *args[:-1], host, args[-1]], stdin=subprocess.DEVNULL)
    new = ""
    while not new:
        assert client.poll() is None, "the SSH session ended"
        new = " ".join(set(fleet.out(POD, SESSIONS).split()) - before)
    return client, new


def _client_gone(fleet, client: subprocess.Popen, sshd: str) -> None:
    """End ``client`` while the pod's ``sshd`` of its session is stopped, and wait until its
    connection is no longer established there: the session is ending, its sshd still there."""
    fleet.out(POD, f"kill -STOP {sshd}")
    client.kill()
    client.wait()
    fleet.out(POD, GONE.format(pid=sshd))


@pytest.mark.parametrize("command", ["", "exec sleep 603"])
def test_an_ssh_session_is_work_until_its_client_has_gone(fleet, quiet, tmp_path, command):
    _quiet_entry(fleet, tmp_path)
    client, sshd = _session(fleet, *(["-N", ""] if not command else [command]))
    try:
        live = _entry(fleet, tmp_path)  # a tunnel, or a command, is an SSH session
        _client_gone(fleet, client, sshd)
        gone = _entry(fleet, tmp_path)
    finally:
        client.kill()
        fleet.out(POD, f"kill -CONT {sshd}; pkill -f '[s]leep 603'; true")
    assert live["idle"] is False
    assert any(why.startswith("SSH session: ") for why in live["activity"]["in_use"]), live
    if not command:  # its sshd, ending, is no session
        assert gone["idle"] is True, gone["activity"]
    else:  # what the session started is the pod's own work, still running
        assert gone["idle"] is False
        assert "process sleep (pid" in str(gone["activity"]["in_use"]), gone["activity"]
        assert "SSH session" not in str(gone["activity"]["in_use"])


def test_a_quiet_pod_keeps_its_idle_period_on_the_pod(fleet, quiet, tmp_path):
    first = _quiet_entry(fleet, tmp_path)
    again = _entry(fleet, tmp_path)
    assert again["idle"] is True
    assert again["activity"]["idle_for"] > first["activity"]["idle_for"]
    ended = _started(fleet, "sleep 0")  # a process that starts and ends between two checks
    fleet.out(POD, f"while [ -e /proc/{ended} ]; do sleep 0.1; done")
    assert _entry(fleet, tmp_path)["activity"]["idle_for"] > again["activity"]["idle_for"]


def test_a_process_podstate_cannot_read_makes_idle_unknown(fleet, quiet, tmp_path):
    _quiet_entry(fleet, tmp_path)
    pid = _started(fleet, "setpriv --reuid=65534 --regid=65534 --clear-groups sleep 602")
    try:
        entry = _entry(fleet, tmp_path)
    finally:
        _end(fleet, "sleep 602")
    assert entry["idle"] is None, entry["activity"]
    assert f"what sleep (pid {pid}) does (another user's" in entry["activity"]["unknown"][0]
    assert "idle unknown (unread: what sleep" in entry["table"]
