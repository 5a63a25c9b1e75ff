"""The boot hook restores a pod's own state or nothing: data that names no pod id, a
container without RUNPOD_POD_ID, data replaced while the hook reads it, host keys another
pod saved, a pod without a volume, GPUs other than the data was written for, a volume whose
path has a space; and podstate-ready is on every pod, violations or not.

End to end on sandbox pods restarted with RunPod's template command: pod-2 (local volume,
8 GPUs on NVLink), pod-3 (64 MiB /dev/shm: a violation), pod-4 (privileged: it may mount,
2 GPUs on NVLink, COMMUNITY), pod-1 (the other pod of a shared volume).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from podstate.facts.gpu import all_nvlink, parse_topology
from podstate.operations import boot as boot_ops
from podstate.roles import env
from podstate.sandbox import container
from podstate.sandbox.state import pod_state_dir
from podstate.shell import script_file
from tests.e2e import ROOT, apply, check
from tests.test_runpod import served_key

SANDBOX = {"pods": 4}
TEMPLATE = "bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'"
STATE = "/workspace/.podstate/boot/state"
BASE = {"shm": {"min_size": "32M"}, "boot": {"hook": True}}
LAYOUT = "seed/usr/local/share/nvidia-smi-standin/layout"


# --- unit tests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture",
    [*sorted(ROOT.glob("tests/fixtures/topo-*.txt")), ROOT / "tests/fixtures/nvidia/h200-topo.txt"],
)
def test_the_hook_reads_the_gpus_as_the_probe_does(fixture):
    program = re.search(r"awk -F '\\t' '(.*?)'\n", script_file("boot.sh"), re.S)
    assert program, "the hook reads nvidia-smi topo -m with awk"
    text = fixture.read_text()
    seen = subprocess.run(
        ["awk", "-F", "\t", program[1]], input=text, capture_output=True, text=True, check=True
    ).stdout
    links = parse_topology(text)
    count = len({i for i, _ in links})
    assert seen == f"{count} {'nvlink' if all_nvlink(links, count) else 'other'}\n"


@pytest.mark.parametrize("volume", ["/workspace", "/mnt/my vol", "/mnt/it's", "/mnt/$x y"])
def test_the_start_command_is_one_command_for_bash_whatever_the_volume_path(volume):
    where = boot_ops.Layout(volume)
    words = shlex.split(where.start_command())
    assert words[:2] == ["bash", "-c"] and len(words) == 3
    script = shlex.shlex(words[2], posix=True, punctuation_chars=True)
    assert list(script) == [".", where.hook, ";", "exec", "/start.sh"]


# --- end to end ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(fleet, tmp_path_factory) -> dict:
    """The environment of a user whose pods come from the sandbox's RunPod API."""
    return fleet.api_env(tmp_path_factory.mktemp("hostkeys"))


def restart(pod: str, command: str = "exec " + TEMPLATE) -> None:
    container.set_start_command(pod, command)
    container.restart(pod)


def boot_report(fleet, api: dict, pod: str, tmp_path: Path) -> tuple[int, dict, str]:
    """Return the check's exit status, the pod's entry in its JSON, and its output."""
    out = tmp_path / "r.json"
    result = check(fleet, "--limit", pod, "--json", str(out), env=api)
    assert "Traceback" not in result.stdout + result.stderr
    return result.returncode, json.loads(out.read_text())["pods"][pod], result.stdout


def applied(fleet, api: dict, pod: str, state: dict) -> None:
    fleet.host_vars(pod, state)
    run = apply(fleet, "--limit", pod, env=api)
    assert run.returncode == 0, run.stderr


def restored_nothing(fleet, pod: str) -> None:
    assert fleet.ssh(pod, f"test -e {env.PROFILE}").returncode == 1
    assert fleet.ssh(pod, "test -e /etc/podstate/ready").returncode == 1


def test_data_that_names_no_pod_id_is_not_restored(fleet, api, tmp_path):
    applied(fleet, api, "pod-2", BASE)
    lines = fleet.out("pod-2", f"cat {STATE}").splitlines(keepends=True)
    old = boot_ops.render_state("old-pod", None, lines[2:-1])  # checksum and all
    fleet.out("pod-2", f"cat > {STATE}", old.encode())

    restart("pod-2")

    restored_nothing(fleet, "pod-2")
    _, entry, _ = boot_report(fleet, api, "pod-2", tmp_path)
    assert entry["boot"]["outcome"] == "skipped"
    assert "(for pod old-pod) names no RunPod pod id" in entry["boot"]["reason"]


def test_a_container_without_a_pod_id_gets_a_violation_and_nothing_restored(fleet, api, tmp_path):
    environment = pod_state_dir(fleet.state, "pod-2") / "container.env"
    kept = environment.read_text()
    environment.write_text("".join(line for line in kept.splitlines(keepends=True)
                                   if "RUNPOD_POD_ID=" not in line))  # fmt: skip
    try:
        restart("pod-2")
        fleet.host_vars("pod-2", BASE)
        run = apply(fleet, "--limit", "pod-2", env=api)
        assert run.returncode == 1
        assert "has no RUNPOD_POD_ID" in run.stdout + run.stderr
        assert fleet.out("pod-2", f"sed -n 2p {STATE}") == "pod pod-2 -\n"

        restart("pod-2")

        restored_nothing(fleet, "pod-2")
        status, entry, stdout = boot_report(fleet, api, "pod-2", tmp_path)
        assert status == 1 and entry["boot"]["outcome"] == "skipped"
        assert "names no RunPod pod id" in entry["boot"]["reason"]
        assert any("has no RUNPOD_POD_ID" in v["message"] for v in entry["violations"])
    finally:
        environment.write_text(kept)
    restart("pod-2")
    applied(fleet, api, "pod-2", BASE)


# A tool of the image that replaces the hook's data with another pod's, or back, after
# every read of it: as an apply from a pod sharing the volume would, between two reads.
SWAPPING = """#!/bin/sh
PATH=${PATH#/workspace/wrap:}
"${0##*/}" "$@"
r=$?
for a in "$@"; do
    if [ "$a" = /workspace/.podstate/boot/state ]; then
        next=/workspace/wrap/other
        cmp -s "$a" "$next" && next=/workspace/wrap/mine
        cp "$next" "$a.x" && mv -f "$a.x" "$a"
        echo "${0##*/}" >>/workspace/wrap/reads
    fi
done
exit $r
"""


def test_the_hook_restores_the_data_it_checked_when_another_pod_replaces_it(fleet, api, tmp_path):
    applied(fleet, api, "pod-1", {**BASE, "env": {"WHO": "pod-1"}})
    other = fleet.out("pod-1", f"cat {STATE}")
    applied(fleet, api, "pod-2", {**BASE, "env": {"WHO": "pod-2"}})
    fleet.out("pod-2", "mkdir -p /workspace/wrap")
    fleet.out("pod-2", "cat > /workspace/wrap/other", other.encode())
    fleet.out("pod-2", f"cp {STATE} /workspace/wrap/mine")
    for tool in ("cat", "cp", "head", "sed", "tail", "awk", "dd"):
        fleet.out("pod-2", f"cat > /workspace/wrap/{tool} && chmod +x /workspace/wrap/{tool}",
                  SWAPPING.encode())  # fmt: skip

    restart("pod-2", "export PATH=/workspace/wrap:$PATH\nexec " + TEMPLATE)

    assert fleet.out("pod-2", "cat /workspace/wrap/reads")  # the data was replaced
    assert "export WHO=pod-2\n" in fleet.out("pod-2", f"cat {env.PROFILE}")
    assert fleet.out("pod-2", "tail -n 1 /etc/podstate/boot").endswith(" ready\n")
    fleet.out("pod-2", "rm -r /workspace/wrap")
    restart("pod-2")


def test_host_keys_another_pod_saved_are_not_restored(fleet, api, tmp_path):
    applied(fleet, api, "pod-2", {**BASE, "boot": {"hook": True, "host_keys": "keep"}})
    port = json.loads((fleet.state / "pods.json").read_text())["pod-2"]["port"]
    # another pod sharing the volume saves its own keys, as podstate does
    fleet.out("pod-2", "d=$(mktemp -d) && ssh-keygen -q -t ed25519 -N '' -f $d/ssh_host_ed25519_key"
              " && cd $d && tar -cf /workspace/.podstate/boot/hostkeys.tar ssh_host_* &&"
              " cat ssh_host_* | sha256sum >/workspace/.podstate/boot/hostkeys.sum")  # fmt: skip
    theirs = fleet.out("pod-2", "cd /tmp && tar -xOf /workspace/.podstate/boot/hostkeys.tar"
                       " ssh_host_ed25519_key.pub").split()[1]  # fmt: skip

    restart("pod-2")

    assert served_key(port).split()[1] != theirs
    status = fleet.out("pod-2", "cat /etc/podstate/boot")
    assert "host keys: the keys in /workspace/.podstate/boot/hostkeys.tar are not" in status
    assert "restored host keys" not in status


def test_a_pod_whose_volume_path_is_a_plain_directory_has_no_volume(fleet, api, tmp_path):
    fleet.out("pod-4", "umount /workspace && test -d /workspace")  # as without a volume
    fleet.host_vars("pod-4", BASE)
    run = apply(fleet, "--limit", "pod-4", env=api)
    assert run.returncode == 1
    assert "this pod has no volume at /workspace" in run.stdout + run.stderr
    assert fleet.out("pod-4", "ls -A /workspace") == ""  # no hook, data, record, command
    status, entry, _ = boot_report(fleet, api, "pod-4", tmp_path)
    assert status == 1 and entry["boot"] is None
    assert [v["id"] for v in entry["violations"]] == ["boot.hook"]
    restart("pod-4")


@pytest.mark.parametrize(
    ("change", "seen"),
    [
        ("link|PHB", "2 GPUs (other)"),
        ("fail|255|Failed to initialize NVML: Unknown Error", "GPUs that nvidia-smi cannot read"),
    ],
)
def test_a_restart_with_other_gpus_keeps_the_nccl_guards_safe_and_no_marker(
    fleet, api, tmp_path, change, seen
):
    applied(fleet, api, "pod-4", BASE)
    assert "NCCL_P2P_DISABLE" not in fleet.out("pod-4", f"cat {env.PROFILE}")  # NVLink
    layout = pod_state_dir(fleet.state, "pod-4") / LAYOUT
    kept = layout.read_text()
    layout.write_text(kept.replace("link|NV4\n", "") + change + "\n")
    try:
        restart("pod-4")
        profile = fleet.out("pod-4", f"cat {env.PROFILE}")
        assert "export NCCL_P2P_DISABLE=1\n" in profile
        assert "export NCCL_IB_DISABLE=1\n" in profile
        assert fleet.ssh("pod-4", "podstate-ready").returncode == 1
        _, entry, _ = boot_report(fleet, api, "pod-4", tmp_path)
        assert entry["boot"]["outcome"] == "pending"
        assert entry["boot"]["pending"] == [
            f"gpus: the data was written for 2 GPUs (nvlink), and this container has "
            f"{seen}: the NCCL guards are at their safe values "
            "until the next apply"
        ]
    finally:
        layout.write_text(kept)
    restart("pod-4")


def test_the_profile_the_hook_guarded_goes_when_env_and_nccl_leave(fleet, api, tmp_path):
    kept_vars = (fleet.vars_dir / "group_vars" / "all.yaml").read_text()
    layout = pod_state_dir(fleet.state, "pod-4") / LAYOUT
    kept = layout.read_text()
    fleet.group_vars("all", {"shm": {"min_size": "32M"}})  # no dirs, env or nccl but pod-4's own
    try:
        applied(fleet, api, "pod-4", {**BASE, "env": {"WHO": "pod-4"},
                                      "nccl": {"p2p": "auto", "ib": "auto"}})  # fmt: skip
        assert "NCCL_P2P_DISABLE" not in fleet.out("pod-4", f"cat {env.PROFILE}")  # NVLink
        layout.write_text(kept.replace("link|NV4\n", "") + "link|PHB\n")
        restart("pod-4")
        assert "export NCCL_P2P_DISABLE=1\n" in fleet.out("pod-4", f"cat {env.PROFILE}")
        assert "NCCL_P2P_DISABLE" in fleet.out("pod-4", f"cat {env.DECLARED}")

        fleet.host_vars("pod-4", BASE)
        _, entry, _ = boot_report(fleet, api, "pod-4", tmp_path)
        changes = [c["operation"] for c in entry["changes"]]
        for path in (env.PROFILE, env.DECLARED):  # as the hook wrote them: podstate's
            assert f"would remove: {path}" in changes, changes
        assert not [c for c in changes if "left as it is" in c]
        assert apply(fleet, "--limit", "pod-4", env=api).returncode == 0
        gone = fleet.ssh("pod-4", f"test -e {env.PROFILE} || test -e {env.DECLARED}")
        assert gone.returncode == 1
        status, entry, stdout = boot_report(fleet, api, "pod-4", tmp_path)
        assert (status, entry["status"]) == (0, "ok"), stdout
    finally:
        layout.write_text(kept)
        fleet.group_vars("all", kept_vars)
    restart("pod-4")


def test_the_start_command_for_a_volume_path_with_a_space_boots(fleet, api, tmp_path):
    where = boot_ops.Layout("/mnt/my vol")
    mount = 'mkdir -p "/mnt/my vol" && mount --bind /workspace "/mnt/my vol"'
    fleet.out("pod-4", mount)
    applied(fleet, api, "pod-4", {**BASE, "boot": {"hook": True, "volume": "/mnt/my vol"}})

    restart("pod-4", f"{mount}\nexec {where.start_command()}")

    assert fleet.out("pod-4", "tail -n 1 /etc/podstate/boot").endswith(" ready\n")
    assert fleet.ssh("pod-4", "podstate-ready").returncode == 0
    _, entry, _ = boot_report(fleet, api, "pod-4", tmp_path)
    assert entry["boot"]["outcome"] == "restored"
    restart("pod-4")


def test_podstate_ready_is_on_a_pod_with_a_violation(fleet, api):
    fleet.host_vars("pod-3", {"shm": {"min_size": "1G"}})  # pod-3 has 64 MiB
    assert apply(fleet, "--limit", "pod-3", env=api).returncode == 1
    assert fleet.out("pod-3", "command -v podstate-ready") == "/usr/local/bin/podstate-ready\n"
    waited = fleet.ssh("pod-3", "podstate-ready --wait 1")
    assert waited.returncode == 1 and "not found" not in waited.stderr
