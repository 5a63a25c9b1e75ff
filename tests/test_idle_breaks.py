"""The idle reading (scripts/work.sh) against processes made to fool it: each case runs the
probe's own work function, under dash and bash, in a pid namespace of the test's own (a
/proc that lists the case's processes alone, as a container's does), around a job the case
starts; no sandbox pod is needed.

Each case's script is run by the namespace's process 1; ``W``, a shell function, is one
check, run as a command of its own (as the probe is: not the init's shell), printing
work.sh's lines and then "---".
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from podstate.facts import work
from podstate.shell import script

SHELLS = ["dash", "bash"]
LIMITS = (
    f"{work.CPU_FLOOR_CS} {work.CPU_SHARE_PER_MILLE} {work.IO_FLOOR_BYTES} {work.IO_RATE_BYTES}"
)


def _checks(shell: str, tmp_path: Path, case: str) -> list[list[str]]:
    """Return the lines of each check ``case`` ran (``W``; "---" ends each), run by ``shell``
    as process 1 of a new pid namespace with its own /proc."""
    if os.geteuid() != 0:
        pytest.skip("a pid namespace with its own /proc needs root")
    probe = tmp_path / "work.sh"
    # each check reads once process 1, which started it, waits for it (no longer runnable:
    # on a loaded machine it may not have reached its wait yet, and would read as running)
    probe.write_text(
        'while read -r s </proc/1/stat; s=${s##*) }; [ "${s%% *}" = R ]; do :; done\n'
        + script("enc.sh")
        + "\n"
        + script("work.sh")
        + f"\nwork {tmp_path}/record {LIMITS}\n"
    )
    check = f"{shell} {probe}; echo ---"
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", shell, "-c", f"W() {{ {check}; }}\n{case}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    checks: list[list[str]] = [[]]
    for line in done.stdout.splitlines():
        if line == "---":
            checks.append([])
        else:
            checks[-1].append(line)
    return checks[:-1]


def _kinds(lines: list[str], pid: str) -> set[str]:
    """Return the kinds of work.busy lines of process ``pid``."""
    return {
        line.split()[1]
        for line in lines
        if line.startswith("work.busy ") and line.split()[2] == pid
    }


@pytest.mark.parametrize("shell", SHELLS)
def test_a_cpu_job_whose_name_holds_a_newline_keeps_the_pod_in_use(shell, tmp_path):
    """A COMM may hold a newline (prctl's name, a program's file name): its stat line is then
    two lines. work_stat read the first alone, took the process for unreadable and skipped
    it: a CPU loop so named ran while the pod read idle, its period growing."""
    case = """
W
python3 -c '
import ctypes, os
ctypes.CDLL(None).prctl(15, b"a\\nb) c", 0, 0, 0)
while not os.path.exists("STOP"): pass
' &
sleep 0.5
W
sleep 1.5
W
touch STOP
wait
"""
    checks = _checks(shell, tmp_path, case.replace("STOP", str(tmp_path / "stop")))
    jobs = {line.split()[2] for line in checks[1] if line.startswith("work.busy ")} - {"1"}
    assert len(jobs) == 1, checks
    job = jobs.pop()
    assert {"new", "run"} <= _kinds(checks[1], job)
    assert _kinds(checks[2], job) & {"run", "cpu"} and checks[2][-1] == "work.age 0"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_process_whose_first_thread_ended_is_read_for_its_io(shell, tmp_path):
    """A process whose first thread ended (pthread_exit) while its others go on is a zombie
    by its stat line; its I/O counters still count every thread's. They were not read for
    a zombie: a download or a copy so run wrote 100 MB while the pod read idle."""
    case = """
python3 -c '
import ctypes, os, threading, time
def write():
    with open("/dev/null", "wb") as f:
        while not os.path.exists("STOP"):
            f.write(bytes(65536))
            time.sleep(0.001)
threading.Thread(target=write).start()
time.sleep(0.3)
ctypes.CDLL(None).pthread_exit(None)
' &
sleep 0.8
W
sleep 1
W
touch STOP
wait
"""
    second = _checks(shell, tmp_path, case.replace("STOP", str(tmp_path / "stop")))[1]
    busy = [line.split()[1:3] for line in second if line.startswith("work.busy ")]
    assert [kind for kind, pid in busy if pid != "1"] == ["io"]
    assert second[-1] == "work.age 0"


@pytest.mark.parametrize("shell", SHELLS)
def test_a_zombie_its_parent_never_waits_for_is_new_once_then_the_pod_is_idle(shell, tmp_path):
    """A zombie that stays (its parent never waits) is work once, when it is new, and then
    neither work nor unknown: a pod with one left over is idle again at the next check."""
    case = """
W
python3 -c '
import os, time
if os.fork() == 0:
    os._exit(0)
time.sleep(30)
' &
sleep 0.8
W
sleep 1
W
sleep 1
W
kill $!
"""
    checks = _checks(shell, tmp_path, case)
    assert any(line.startswith("work.busy new") for line in checks[1])
    assert len(checks[2]) == 1 and int(checks[2][0].split()[1]) >= 80
    assert len(checks[3]) == 1 and int(checks[3][0].split()[1]) >= 180
