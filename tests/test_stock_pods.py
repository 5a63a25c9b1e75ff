"""End to end: pods booted as RunPod's start script boots them, nginx, Jupyter Lab and
``sleep infinity`` running with the image's values, are not a violation for ever.

pod-1 runs what every stock pod runs: nginx and the start script's ``sleep infinity``, with
PIP_CACHE_DIR=/workspace/.cache/pip. pod-2 is started with JUPYTER_PASSWORD, so its start
script starts Jupyter Lab too (a Python process named jupyter-lab), and a Python process
left running from an SSH session has RunPod's value as well.
"""

import json

import pytest

from podstate.roles import env
from podstate.sandbox import container
from tests.e2e import apply, check

SANDBOX = {"pods": 2}
RUNPOD = "PIP_CACHE_DIR=/workspace/.cache/pip"
JUPYTER = (
    "jupyter-lab (pid PID) still has PIP_CACHE_DIR=/workspace/.cache/pip, "
    "UV_CACHE_DIR=/workspace/.cache/uv; restart it to pick up PIP_CACHE_DIR=/scratch/pip, "
    "UV_CACHE_DIR=/scratch/uv; " + env.BOOT_ADVICE
)
PYTHON = (
    "python3 (pid PID) still has PIP_CACHE_DIR=/workspace/.cache/pip; restart it to pick up "
    "PIP_CACHE_DIR=/scratch/pip"
)


def stale(message: str, pid: str) -> str:
    return message.replace("PID", pid)


def pid_of(fleet, pod: str, comm: str) -> str:
    """Return the pid of the process named ``comm`` in ``pod`` (its own pid namespace's)."""
    pids = fleet.out(pod, f"pgrep -x {comm}; true").split()
    assert len(pids) == 1, (comm, pids)
    return pids[0]


def environ(fleet, pod: str, pid: str) -> list[str]:
    return fleet.out(pod, f"tr '\\0' '\\n' </proc/{pid}/environ").splitlines()


@pytest.fixture(scope="module")
def stock(fleet):
    container.set_start_command("pod-2", "export JUPYTER_PASSWORD=sandbox")
    container.restart("pod-2")
    # the pods file trusts the host key the restart made (a restart makes a new one)
    pods = fleet.state / "pods"
    keys = "".join((pods / pod / "known_hosts").read_text() for pod in ("pod-1", "pod-2"))
    (fleet.state / "known_hosts").write_text(keys)
    python = fleet.out(
        "pod-2",
        f"env {RUNPOD} setsid python3 -c 'import signal; signal.pause()' "
        ">/dev/null 2>&1 </dev/null & echo $!",
    ).strip()
    pids = {name: pid_of(fleet, "pod-2", name) for name in ("jupyter-lab", "nginx", "sleep")}
    return fleet, {**pids, "python3": python}, apply(fleet)


def test_every_pod_runs_what_runpods_start_script_runs_with_the_images_values(stock):
    fleet, pids, _ = stock
    for name in ("nginx", "sleep"):
        assert RUNPOD in environ(fleet, "pod-1", pid_of(fleet, "pod-1", name)), name
    assert RUNPOD in environ(fleet, "pod-2", pids["jupyter-lab"])
    assert fleet.out("pod-2", f"cat /proc/{pids['jupyter-lab']}/cmdline").startswith("/")
    assert "python" in fleet.out("pod-2", f"readlink /proc/{pids['jupyter-lab']}/exe")


def test_the_first_apply_passes_a_pod_running_only_nginx_and_sleep(stock):
    _, _, run = stock
    assert run.hosts("error") == {"pod-2"}, run.stderr
    stale = [line for line in run.stderr.splitlines() if "env.stale_process" in line]
    assert not [line for line in stale if "nginx" in line or "sleep" in line], stale
    assert not [line for line in stale if "[pod-1]" in line], stale


def test_a_python_the_start_script_started_is_a_violation_that_says_to_arm_the_hook(stock):
    _, pids, run = stock
    assert f"env.stale_process: {stale(JUPYTER, pids['jupyter-lab'])}" in run.stderr


def test_a_python_left_from_an_ssh_session_is_a_violation_without_that_advice(stock):
    _, pids, run = stock
    assert f"env.stale_process: {stale(PYTHON, pids['python3'])}\n" in run.stderr + "\n"


def test_the_check_agrees_and_the_desired_state_moves_names_to_either_side(stock, tmp_path):
    fleet, pids, _ = stock
    check(fleet, "--json", str(tmp_path / "r.json"))
    pods = json.loads((tmp_path / "r.json").read_text())["pods"]
    assert pods["pod-1"]["status"] == "ok", pods["pod-1"]
    assert sorted(v["message"] for v in pods["pod-2"]["violations"]) == [
        stale(JUPYTER, pids["jupyter-lab"]),
        stale(PYTHON, pids["python3"]),
    ]
    fleet.host_vars("pod-1", {"processes": {"matter": ["sleep"]}})
    fleet.host_vars("pod-2", {"processes": {"inert": ["jupyter-lab"]}})
    try:
        check(fleet, "--json", str(tmp_path / "r.json"))
    finally:
        fleet.host_vars("pod-1", None)
        fleet.host_vars("pod-2", None)
    pods = json.loads((tmp_path / "r.json").read_text())["pods"]
    found = {pod: [v["message"] for v in pods[pod]["violations"]] for pod in pods}
    assert found["pod-2"] == [stale(PYTHON, pids["python3"])]
    sleep = pid_of(fleet, "pod-1", "sleep")
    assert [m.split(";")[0] for m in found["pod-1"]] == [
        f"sleep (pid {sleep}) still has PIP_CACHE_DIR=/workspace/.cache/pip, "
        "UV_CACHE_DIR=/workspace/.cache/uv"
    ]
    assert found["pod-1"][0].endswith(env.BOOT_ADVICE)
