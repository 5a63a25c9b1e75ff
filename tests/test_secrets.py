"""End to end: secrets reach every shell kind from a root-only file, and their values appear
nowhere else: not in pyinfra's output at -vvv, not in any report of the check, not in a
command line on the pod while the run goes on, not in any other file on the pod, not in
what podstate keeps on the control machine.
"""

import base64
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from podstate.secret import SECRETS_FILE
from tests.e2e import BIN, ROOT, apply, check, exec_count

SANDBOX = {"pods": 3}
MARKER = f"podstate-marker-{uuid.uuid4().hex}"
TOKEN_VAR = "PODSTATE_TEST_TOKEN"
SHELLS = {
    "ssh pod CMD": "{}",
    "bash -lc": "bash -lc '{}'",
    "bash -ic": "bash -ic '{}' 2>/dev/null",
}


class CmdlineSampler(threading.Thread):
    """Reads every process's command line (the pods share the machine's process list) until
    told to stop; ``seen`` holds the command lines that named a pod-side podstate script,
    ``texts`` every command line read (to look for an encoded value once it is known)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.started_sampling = threading.Event()
        self.hits: list[str] = []
        self.seen: list[str] = []
        self.texts: set[str] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.started_sampling.set()
            time.sleep(0)  # let the test's own thread run between passes
        self.sample()

    def sample(self) -> None:
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                text = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            self.texts.add(text)
            if MARKER in text:
                self.hits.append(text)
            if "install_secret" in text:
                self.seen.append(text)


@pytest.fixture(scope="module")
def secrets(fleet, tmp_path_factory):
    """The fleet after a first apply at -vvv with two secrets, sampled while it ran."""
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    (fleet.vars_dir / "wandb_key").write_text(f"{MARKER}-file\n")
    all_yaml = fleet.vars_dir / "group_vars" / "all.yaml"
    data = yaml.safe_load(all_yaml.read_text())
    data["secrets"] = {
        "HF_TOKEN": {"from_env": TOKEN_VAR},
        "WANDB_API_KEY": {"from_file": "wandb_key"},
    }
    all_yaml.write_text(yaml.safe_dump(data))
    os.environ[TOKEN_VAR] = f"{MARKER}-env 'quoted' $(not run)"
    for pod in fleet.pods:
        fleet.out(pod, "touch /tmp/.before-secrets")
    sampler = CmdlineSampler()
    sampler.start()
    sampler.started_sampling.wait()
    try:
        run = apply(fleet, "-vvv")
    finally:
        sampler.stop.set()
        sampler.join()
    yield run, sampler
    os.environ.pop(TOKEN_VAR, None)


def test_first_apply_succeeds(secrets):
    run, _ = secrets
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
@pytest.mark.parametrize("shell", SHELLS)
def test_every_shell_kind_sees_the_secrets(fleet, secrets, pod, shell):
    command = SHELLS[shell].format('echo "$HF_TOKEN|$WANDB_API_KEY"')
    assert fleet.out(pod, command).strip().splitlines()[-1] == (
        f"{MARKER}-env 'quoted' $(not run)|{MARKER}-file"
    )


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_the_secrets_file_is_root_only(fleet, secrets, pod):
    assert fleet.out(pod, f"stat -c '%U %a' {SECRETS_FILE}").strip() == "root 600"
    assert fleet.out(pod, f"stat -c '%U %a' {os.path.dirname(SECRETS_FILE)}").strip() == "root 700"


def test_no_value_in_pyinfras_output_at_vvv(secrets):
    run, _ = secrets
    assert "Starting operation" in run.stdout + run.stderr or run.json
    assert MARKER not in run.stdout + run.stderr


def test_no_value_in_any_command_line_while_it_ran(fleet, secrets):
    run, sampler = secrets
    assert sampler.seen, "the sampler saw no podstate command on the pod"
    assert sampler.hits == []
    # The file travels base64-encoded on a command's stdin: not on a command line either,
    # nor in pyinfra's output.
    encoded = base64.b64encode(fleet.out("pod-1", f"cat {SECRETS_FILE}").encode()).decode()
    assert MARKER in base64.b64decode(encoded).decode()
    assert [text for text in sampler.texts if encoded in text] == []
    assert encoded not in run.stdout + run.stderr


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_no_value_in_any_other_file_on_the_pod(fleet, secrets, pod):
    found = fleet.out(
        pod,
        "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f "
        "-newer /tmp/.before-secrets -print0 2>/dev/null "
        f"| xargs -0 -r grep -l -F -e {MARKER} 2>/dev/null; true",
    )
    assert found.split() == [SECRETS_FILE]


def test_no_value_in_what_podstate_keeps_on_the_control_machine(secrets):
    places = [Path.home() / ".cache" / "podstate", Path.home() / ".local/state/podstate"]
    for place in filter(Path.exists, places):
        result = subprocess.run(["grep", "-rlF", MARKER, str(place)], capture_output=True)
        assert result.stdout == b"", result.stdout


def test_second_apply_is_quiet_and_check_costs_one_command(fleet, secrets):
    again = apply(fleet)
    assert again.returncode == 0, again.stderr
    assert again.hosts("success") == set()
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    assert check(fleet).returncode == 0
    assert {p: exec_count(fleet, p) - before[p] for p in fleet.pods} == {p: 1 for p in fleet.pods}


def test_a_hand_edit_is_drift_on_that_pod_alone_without_the_value(fleet, secrets, tmp_path):
    fleet.out("pod-2", f"sed -i 's/-env/-edited/' {SECRETS_FILE}")
    reports = {k: tmp_path / f"r.{k}" for k in ("json", "xml", "md")}
    result = check(
        fleet,
        "--diff",
        "--json",
        str(reports["json"]),
        "--junit",
        str(reports["xml"]),
        "--markdown",
        str(reports["md"]),
    )
    pods = json.loads(reports["json"].read_text())["pods"]
    assert result.returncode == 2
    assert {name: pod["status"] for name, pod in pods.items()} == {
        "pod-1": "ok",
        "pod-2": "drift",
        "pod-3": "ok",
    }
    assert pods["pod-2"]["changes"] == [
        {
            "role": "Secrets",
            "operation": "HF_TOKEN differs",
            "file": "deploy/pod.py",
            "secret": True,
        }
    ]
    assert "would change: Secrets | HF_TOKEN differs" in result.stdout
    outputs = [result.stdout, result.stderr] + [p.read_text() for p in reports.values()]
    assert [out for out in outputs if MARKER in out] == []


def test_rotating_a_secret_is_drift_everywhere_until_applied(fleet, secrets, tmp_path):
    os.environ[TOKEN_VAR] = f"{MARKER}-rotated"
    report = tmp_path / "r.json"
    result = check(fleet, "--diff", "--json", str(report), "--markdown", str(tmp_path / "r.md"))
    assert result.returncode == 2
    pods = json.loads(report.read_text())["pods"]
    assert {name: pod["status"] for name, pod in pods.items()} == dict.fromkeys(pods, "drift")
    assert MARKER not in result.stdout + report.read_text() + (tmp_path / "r.md").read_text()
    run = apply(fleet, "-vvv")
    assert run.returncode == 0, run.stderr
    assert MARKER not in run.stdout + run.stderr
    assert fleet.out("pod-1", "echo $HF_TOKEN").strip() == f"{MARKER}-rotated"
    assert check(fleet).returncode == 0


def test_a_missing_variable_stops_the_run_before_contact_naming_it(fleet, secrets):
    value = os.environ.pop(TOKEN_VAR)
    try:
        before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
        run = apply(fleet)
        result = check(fleet)
        assert {pod: exec_count(fleet, pod) for pod in fleet.pods} == before
    finally:
        os.environ[TOKEN_VAR] = value
    line = f"secrets.HF_TOKEN: the environment variable {TOKEN_VAR} is not set"
    assert run.returncode != 0 and line in run.stderr + run.stdout
    assert result.returncode == 1 and line in result.stdout + result.stderr
    assert "Traceback" not in run.stderr + result.stderr


def test_a_missing_file_stops_the_run_before_contact_naming_it(fleet, secrets):
    key = fleet.vars_dir / "wandb_key"
    text = key.read_text()
    key.unlink()
    try:
        run = apply(fleet)
    finally:
        key.write_text(text)
    assert run.returncode != 0
    assert "secrets.WANDB_API_KEY: cannot read the file wandb_key" in run.stderr + run.stdout
    assert MARKER not in run.stderr + run.stdout and "Traceback" not in run.stderr


def test_a_value_put_where_a_variable_name_goes_is_not_echoed(fleet, secrets):
    fleet.host_vars("pod-1", {"secrets": {"X": {"from_env": f"{MARKER} oops"}}})
    try:
        run = apply(fleet)
    finally:
        fleet.host_vars("pod-1", None)
    assert run.returncode != 0
    assert "secrets.X.from_env: the value is not an environment variable name" in run.stderr
    assert MARKER not in run.stderr + run.stdout


def test_podstate_inventory_does_not_show_values(fleet, secrets):
    result = subprocess.run(
        [str(BIN / "podstate"), "inventory"],
        cwd=ROOT,
        env=fleet.env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert MARKER not in result.stdout + result.stderr
