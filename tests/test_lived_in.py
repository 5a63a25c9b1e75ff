"""End to end: files podstate edits on pods that have been lived in.

Each pod starts with one oddity, set up before the first apply:
pod-1: ~/.bashrc is a link to the user's file on the network volume (sshfs /workspace),
       which greets every shell, even ``ssh pod CMD``;
pod-2: /etc/profile.d/podstate.sh is a directory;
pod-3: ~/.bashrc has mode 600 and terminal escape sequences in it;
pod-4: /etc is read-only;
pod-5: ~/.bashrc is a link into a directory of the volume that is gone;
pod-6: ~/.bashrc is larger than podstate reads.
"""

import json

import pytest

from podstate.limits import MAX_FILE
from podstate.roles import env
from podstate.sandbox import inside
from tests.e2e import apply, check

SANDBOX = {"pods": 6}
PROFILE = "/etc/profile.d/podstate.sh"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
LEFTOVERS = "find / -xdev -name '.*.podstate.*' 2>/dev/null; find /workspace -name '.*.podstate.*'"


GREETING = "Welcome to your pod"


def leftovers(fleet, pod: str) -> str:
    return fleet.ssh(pod, LEFTOVERS).stdout.replace(GREETING + "\n", "")


@pytest.fixture(scope="module")
def lived_in(fleet, tmp_path_factory):
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    fleet.out("pod-1", "cp ~/.bashrc /workspace/.bashrc && ln -sf /workspace/.bashrc ~/.bashrc")
    fleet.out("pod-1", "printf 'alias ll=\"ls -l\"\\n' >> /workspace/.bashrc")
    fleet.out("pod-1", f"sed -i '1i echo {GREETING}' /workspace/.bashrc")
    fleet.out("pod-2", f"mkdir -p {PROFILE} && touch {PROFILE}/keep")
    fleet.out("pod-3", f"printf '%s\\n' '# {TITLE}{CLEAR}' >> ~/.bashrc && chmod 600 ~/.bashrc")
    inside.pod_exec("pod-4", "mount --bind /etc /etc && mount -o remount,bind,ro /etc")
    fleet.out("pod-5", "ln -sf /workspace/dotfiles/.bashrc ~/.bashrc")
    fleet.out("pod-6", f"head -c {MAX_FILE + 1} /dev/zero | tr '\\0' '#' >> ~/.bashrc")
    before = {pod: fleet.out(pod, "cat ~/.bashrc 2>&1; ls -la ~/.bashrc") for pod in fleet.pods}
    report = tmp_path_factory.mktemp("check") / "report.json"
    drift = check(fleet, "--diff", "--json", str(report))
    drift.json = json.loads(report.read_text())
    return fleet, before, drift, apply(fleet)


def test_apply_fails_exactly_the_pods_it_could_not_converge(lived_in):
    _, _, _, run = lived_in
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    assert run.hosts("error") == {"pod-2", "pod-4", "pod-5", "pod-6"}


def test_linked_bashrc_is_edited_in_place_of_its_target(lived_in):
    fleet, *_ = lived_in
    assert fleet.out("pod-1", "readlink ~/.bashrc").split("\n")[-2] == "/workspace/.bashrc"
    target = fleet.out("pod-1", "cat /workspace/.bashrc")
    assert target.count(f". {PROFILE}") == 2 and 'alias ll="ls -l"' in target
    assert fleet.out("pod-1", "echo $TMPDIR") == f"{GREETING}\n/scratch/tmp\n"
    assert leftovers(fleet, "pod-1") == ""


def test_directory_at_the_profile_path_is_a_violation_and_untouched(lived_in):
    fleet, _, _, run = lived_in
    assert f"{PROFILE} is a directory, not the regular file podstate writes there" in run.stderr
    assert fleet.out("pod-2", f"ls -A {PROFILE}") == "keep\n"
    assert leftovers(fleet, "pod-2") == ""


def test_mode_600_is_kept(lived_in):
    fleet, *_ = lived_in
    assert fleet.out("pod-3", "stat -c %a ~/.bashrc").strip() == "600"
    assert fleet.out("pod-3", "cat ~/.bashrc").count(f". {PROFILE}") == 2


def test_escape_sequences_from_a_pod_are_shown_not_obeyed(lived_in):
    _, _, drift, _ = lived_in
    assert drift.returncode == 1
    assert "\x1b" not in drift.stdout and "\x07" not in drift.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in drift.stdout
    changes = drift.json["pods"]["pod-3"]["changes"]
    assert any(TITLE + CLEAR in change.get("diff", "") for change in changes)


def test_read_only_etc_fails_the_pod_with_the_reason(lived_in):
    fleet, _, _, run = lived_in
    lines = [line for line in run.stderr.splitlines() if "pod-4" in line]
    assert any("Read-only file system" in line for line in lines), run.stderr
    assert fleet.ssh("pod-4", f"test -e {PROFILE}").returncode == 1
    assert leftovers(fleet, "pod-4") == ""


def test_dangling_link_is_a_violation_and_nothing_is_written(lived_in):
    fleet, before, _, run = lived_in
    assert (
        "~/.bashrc is a symbolic link to /workspace/dotfiles/.bashrc, which does not resolve "
        "(a link loop, or a missing directory): is the volume it points to mounted?"
    ) in run.stderr
    assert fleet.out("pod-5", "cat ~/.bashrc 2>&1; ls -la ~/.bashrc") == before["pod-5"]
    assert fleet.ssh("pod-5", "test -e /workspace/dotfiles").returncode == 1


def test_oversized_bashrc_is_a_violation_that_states_the_limit(lived_in):
    fleet, before, _, run = lived_in
    assert "~/.bashrc is a file of 67.5K" in run.stderr
    assert "podstate edits files of up to 64K" in run.stderr
    assert fleet.out("pod-6", "cat ~/.bashrc 2>&1; ls -la ~/.bashrc") == before["pod-6"]


def test_check_reports_each_pod_after_the_apply(lived_in, tmp_path):
    fleet, *_ = lived_in
    result = check(fleet, "--json", str(tmp_path / "r.json"))
    pods = json.loads((tmp_path / "r.json").read_text())["pods"]
    assert result.returncode == 1
    assert {name: pod["status"] for name, pod in pods.items()} == {
        "pod-1": "ok",
        "pod-2": "violation",
        "pod-3": "ok",
        "pod-4": "drift",
        "pod-5": "violation",
        "pod-6": "violation",
    }


def test_a_malformed_probe_answer_fails_that_pod_alone(lived_in, tmp_path):
    """A ``stat`` that answers nonsense (as an odd image's might) makes the probe's answer
    malformed: that pod is an error with one line, the others are reported as before."""
    fleet, *_ = lived_in
    fake = "/usr/local/bin/stat"
    fleet.out("pod-1", f"printf '#!/bin/sh\\necho nonsense here\\n' > {fake} && chmod +x {fake}")
    try:
        result = check(fleet, "--json", str(tmp_path / "r.json"))
    finally:
        fleet.out("pod-1", f"rm {fake}")
    pods = json.loads((tmp_path / "r.json").read_text())["pods"]
    assert pods["pod-1"]["status"] == "error"
    assert "the pod's answer to the probe is malformed" in pods["pod-1"]["error"]
    assert "\n" not in pods["pod-1"]["error"]
    assert pods["pod-3"]["status"] == "ok" and pods["pod-2"]["status"] == "violation"
    assert "Traceback" not in result.stdout + result.stderr


APPEND = """from pyinfra.operations import server

server.shell(name="RunPod's line", commands=["echo 'source /etc/rp_environment' >> ~/.bashrc"])
"""
RUNPOD_LINE = "source /etc/rp_environment\n"


def test_an_edit_of_bashrc_that_races_an_append_loses_nothing(lived_in, tmp_path):
    """Another program appends to ~/.bashrc after the probe read it and before podstate's
    edit runs (as RunPod's start script does after sshd answers; here a team file that
    runs first): the edit is refused, saying so, and the appended line is kept; the next
    apply edits the file as it is then."""
    fleet, *_ = lived_in
    pod = "pod-3"
    fleet.out(pod, "sed -i '/# >>> podstate >>>/,/# <<< podstate <<</d' ~/.bashrc")
    unhooked = fleet.out(pod, "cat ~/.bashrc")
    (tmp_path / "append.py").write_text(APPEND)
    run = apply(fleet, "--limit", pod, deploys=[str(tmp_path / "append.py"), "deploy/pod.py"])
    assert run.returncode == 1
    assert "/root/.bashrc: changed since podstate read it" in run.stderr, run.stderr
    assert fleet.out(pod, "cat ~/.bashrc") == unhooked + RUNPOD_LINE
    assert apply(fleet, "--limit", pod).returncode == 0
    hooked = fleet.out(pod, "cat ~/.bashrc")
    assert hooked.startswith(env.HOOK) and hooked.endswith(RUNPOD_LINE + env.HOOK)
