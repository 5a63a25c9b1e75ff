"""podstate on an older pod image: sandbox pods on Debian bullseye (bash 5.1, coreutils
8.32, OpenSSH 8.4, git 2.30, Python 3.9: close to Ubuntu 22.04's pod images), built once
with debootstrap (podstate.sandbox.images), through every role's common case, the check,
a removal, the boot hook over a restart, the watch and the idle reading.

pod-1: COMMUNITY, 2 GPUs over PCIe, sshfs volume; pod-2: SECURE, 8 GPUs NVLink, local
volume; pod-3: a 64 MiB /dev/shm; pod-4: may mount (tmpfs scratch, /dev/shm grown).
Unit tests of the image cache need no pod.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from podstate.sandbox import container, images
from podstate.sandbox.state import SandboxError
from tests.e2e import BIN, apply, check, run
from tests.test_repos import MAKE_ORIGIN

SANDBOX = {"pods": 4, "image": "bullseye"}
PODS = ["pod-1", "pod-2", "pod-3", "pod-4"]
TOKEN_VAR = "PODSTATE_TEST_OLD_IMAGE_TOKEN"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@b"
STATE = {
    "env": {"PYTHONUNBUFFERED": "1", "OLD_IMAGE": "bullseye"},
    "files": {
        "/etc/podstate-test/app.conf": {"content": "made by podstate\n", "mode": "0640"},
        "/workspace/notes/podstate.txt": {"content": "on the volume\n"},
    },
    "authorized_keys": [KEY],
    "secrets": {"HF_TOKEN": {"from_env": TOKEN_VAR}},
    "boot": {"hook": True},
    "repos": {
        "/root/code/app": {"url": "file:///srv/git/app.git", "ref": "v1.0"},
        "/root/code/dev": {"url": "file:///srv/git/app.git", "ref": "main"},
    },
}
TEMPLATE = "exec bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'"
SHOWN = 'echo "$TMPDIR|$PIP_CACHE_DIR|$OLD_IMAGE|$NCCL_P2P_DISABLE|$NCCL_IB_DISABLE"'


# --- the image cache, without pods ---------------------------------------------------------


def test_an_unknown_image_is_one_line_naming_the_known_ones(tmp_path):
    with pytest.raises(SandboxError) as raised:
        images.build("buster", tmp_path)
    assert str(raised.value) == "unknown sandbox image 'buster'; known: host, bullseye, trixie"


def test_without_debootstrap_the_build_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError) as raised:
        images.build("bullseye", tmp_path / "cache")
    assert str(raised.value) == (
        "building the bullseye image needs debootstrap (apt-get install debootstrap)"
    )
    assert not (tmp_path / "cache").exists()


def test_a_failed_build_is_one_line_naming_its_log_and_leaves_no_image(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "debootstrap"  # fails as debootstrap does without the archive
    fake.write_text('#!/bin/sh\nmkdir -p "$4/etc"\necho "I: Retrieving InRelease"\n'
                    'echo "E: Failed getting release file"\nexit 1\n')  # fmt: skip
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    cache = tmp_path / "cache"
    with pytest.raises(SandboxError) as raised:
        images.build("bullseye", cache)
    assert str(raised.value) == (
        "building the bullseye image failed: E: Failed getting release file "
        f"(see {cache}/bullseye.log)"
    )
    assert sorted(p.name for p in cache.iterdir()) == [".bullseye.lock", "bullseye.log"]


def test_a_built_image_is_found_without_debootstrap_and_the_host_is_root(
    fleet, tmp_path, monkeypatch
):
    built = images.build("bullseye")  # the machine's cache, which the fleet's pods run on
    monkeypatch.setenv("PATH", str(tmp_path))
    assert images.build("bullseye") == built
    assert images.root_of("host") == Path("/")
    assert (built / "etc/debian_version").read_text().startswith("11.")
    assert not list((built / "etc/ssh").glob("ssh_host_*"))  # RunPod's images have none


# --- pods on bullseye ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command,version",
    [
        ("cat /etc/debian_version", r"^11\.\d+$"),
        ("bash --version | head -n 1", r"^GNU bash, version 5\.1\."),
        ("ls --version | head -n 1", r"^ls \(GNU coreutils\) 8\.32$"),
        ("ssh -V 2>&1", r"^OpenSSH_8\.4"),
        ("/usr/sbin/sshd -V 2>&1 | grep OpenSSH_ || true", r"^OpenSSH_8\.4"),
        ("git --version", r"^git version 2\.30\."),
        ("python3 --version", r"^Python 3\.9\."),
    ],
)
def test_the_pods_really_run_bullseye(fleet, command, version):
    assert re.search(version, fleet.out("pod-1", command).strip()), command


def test_the_pod_is_its_own_container_on_the_image(fleet):
    assert fleet.out("pod-1", "cat /proc/1/cmdline | tr '\\0' ' '") == "/bin/sh /start.sh "
    processes = fleet.out("pod-1", "ps -e -o comm=").split()
    assert {"sshd", "nginx", "sleep"} <= set(processes) and len(processes) < 12
    assert fleet.out("pod-1", "stat -f -c %T /workspace").strip() == "fuseblk"
    assert fleet.out("pod-1", "nvidia-smi -L").count("RTX 4090") == 2


@pytest.fixture(scope="module")
def api(fleet, tmp_path_factory) -> dict:
    """The environment of a user whose pods come from the sandbox's RunPod API (which
    vouches for the host key a restart makes), with the secret's value."""
    env = fleet.api_env(tmp_path_factory.mktemp("hostkeys"))
    env[TOKEN_VAR] = "hf_old_image_secret"
    return env


@pytest.fixture(scope="module")
def converged(fleet, api):
    """The first apply of STATE over the shipped group_vars: pod-3's 64 MiB /dev/shm is a
    violation; then pod-3 accepts it, and the whole fleet converges."""
    for pod in PODS:  # the user's repository, for the repos role to clone
        fleet.out(pod, MAKE_ORIGIN.format(bare="/srv/git/app.git"))
    fleet.group_vars("all", STATE, merge=True)
    first = apply(fleet, env=api)
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    second = apply(fleet, env=api)
    assert second.returncode == 0, second.stderr
    return first


def test_every_role_applies_its_common_case(fleet, converged):
    assert converged.returncode == 1 and converged.hosts("error") == {"pod-3"}
    assert "/dev/shm is 64M, below the minimum 16G" in converged.stderr
    nccl = {"pod-1": "1|1", "pod-2": "|", "pod-3": "|1", "pod-4": "|1"}
    for pod in PODS:
        for shell in ("{}", "bash -lc '{}'", "bash -ic '{}' 2>/dev/null"):
            shown = fleet.out(pod, shell.format(SHOWN)).strip().splitlines()[-1]
            assert shown == f"/scratch/tmp|/scratch/pip|bullseye|{nccl[pod]}", (pod, shell)
        assert fleet.out(pod, "stat -c %a /scratch/tmp").strip() == "1777"
        assert fleet.out(pod, "cat /etc/podstate-test/app.conf") == "made by podstate\n"
        assert fleet.out(pod, "stat -c %a /etc/podstate-test/app.conf").strip() == "640"
        assert fleet.out(pod, "cat /workspace/notes/podstate.txt") == "on the volume\n"
        assert KEY in fleet.out(pod, "cat ~/.ssh/authorized_keys")
        assert fleet.out(pod, "bash -lc 'echo $HF_TOKEN'") == "hf_old_image_secret\n"
        assert fleet.out(pod, "stat -c %a /etc/podstate/secrets/env.sh").strip() == "600"
        assert fleet.ssh(pod, "podstate-ready").returncode == 0
        tag = fleet.out(pod, "git -C /srv/git/app.git rev-parse v1.0^{commit}")
        assert fleet.out(pod, "git -C /root/code/app rev-parse HEAD") == tag
        assert fleet.out(pod, "git -C /root/code/dev symbolic-ref --short HEAD") == "main\n"
    assert fleet.out("pod-4", "stat -f -c %T /scratch").strip() == "tmpfs"
    assert fleet.out("pod-1", "stat -f -c %T /scratch").strip() != "tmpfs"
    assert fleet.out("pod-4", "df -B1 --output=size /dev/shm | tail -n 1").strip() == str(16 << 30)


def test_a_second_apply_changes_nothing(fleet, api, converged):
    again = apply(fleet, env=api)
    assert again.returncode == 0, again.stderr
    assert again.hosts("success") == set()


def _check(fleet, api, tmp_path, *args: str) -> tuple[int, dict, str]:
    """Run the check; return its exit status, JSON report and text."""
    out = tmp_path / "r.json"
    result = check(fleet, "--json", str(out), *args, env=api)
    assert out.exists(), result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return result.returncode, json.loads(out.read_text()), result.stdout


def test_the_check_is_ok_after_the_apply_and_names_a_hand_edit(fleet, api, converged, tmp_path):
    code, report, _ = _check(fleet, api, tmp_path)
    assert code == 0, report["pods"]
    assert {entry["status"] for entry in report["pods"].values()} == {"ok"}

    fleet.out("pod-2", "sed -i 's|/scratch/pip|/workspace/pip|' /etc/profile.d/podstate.sh")
    code, report, text = _check(fleet, api, tmp_path, "--diff")
    assert code == 2
    assert {pod for pod, e in report["pods"].items() if e["status"] == "drift"} == {"pod-2"}
    (change,) = report["pods"]["pod-2"]["changes"]
    assert change["operation"] == "Profile /etc/profile.d/podstate.sh"
    assert "+export PIP_CACHE_DIR=/scratch/pip" in change["diff"].splitlines()
    assert "+export PIP_CACHE_DIR=/scratch/pip" in text  # --diff shows it on the terminal too
    run = apply(fleet, "--limit", "pod-2", env=api)
    assert run.returncode == 0, run.stderr
    assert _check(fleet, api, tmp_path)[0] == 0


def test_a_commit_on_the_detached_checkout_is_named_and_kept(fleet, api, converged):
    fleet.out(
        "pod-2",
        "cd /root/code/app && echo mine > f && git -c user.name=u -c user.email=u@x "
        "commit -qam 'my work on the tag'",
    )
    mine = fleet.out("pod-2", "git -C /root/code/app rev-parse --short HEAD").strip()
    run = apply(fleet, "--limit", "pod-2", env=api)
    assert run.returncode == 1
    assert f"{mine} my work on the tag" in run.stderr
    assert fleet.out("pod-2", "git -C /root/code/app log -1 --format=%s") == "my work on the tag\n"
    fleet.out("pod-2", "git -C /root/code/app checkout -q --detach v1.0")  # the user moves on


def test_a_section_removed_leaves_the_pods(fleet, api, converged, tmp_path):
    before = fleet.out("pod-1", "cat ~/.ssh/authorized_keys")
    fleet.group_vars("all", {"files": {}, "authorized_keys": [], "repos": {}}, merge=True)
    code, report, _ = _check(fleet, api, tmp_path)
    assert code == 2
    changes = [c["operation"] for c in report["pods"]["pod-1"]["changes"]]
    assert "would remove: /etc/podstate-test/app.conf" in changes
    assert "would remove: the checkout /root/code/dev" in changes
    run = apply(fleet, env=api)
    assert run.returncode == 0, run.stderr
    for pod in PODS:
        assert fleet.ssh(pod, "test -e /etc/podstate-test/app.conf").returncode == 1
        assert fleet.ssh(pod, "test -e /workspace/notes/podstate.txt").returncode == 1
        assert fleet.ssh(pod, "test -e /root/code/dev").returncode == 1
    after = fleet.out("pod-1", "cat ~/.ssh/authorized_keys")
    assert KEY in before and KEY not in after
    assert _check(fleet, api, tmp_path)[0] == 0


def test_the_boot_hook_puts_the_pod_back_at_a_restart(fleet, api, converged, tmp_path):
    container.set_start_command("pod-1", TEMPLATE)
    container.restart("pod-1")
    # before any push: every shell kind has the declared values again
    for shell in ("{}", "bash -lc '{}'", "bash -ic '{}' 2>/dev/null"):
        shown = fleet.out("pod-1", shell.format(SHOWN)).strip().splitlines()[-1]
        assert shown == "/scratch/tmp|/scratch/pip|bullseye|1|1", shell
    assert fleet.out("pod-1", "stat -c %a /scratch/tmp").strip() == "1777"
    assert fleet.out("pod-1", "tail -n 1 ~/.bashrc") == "source /etc/rp_environment\n"
    assert fleet.out("pod-1", "echo ${HF_TOKEN:-unset}") == "unset\n"  # never on the volume

    code, report, _ = _check(fleet, api, tmp_path, "--limit", "pod-1")
    entry = report["pods"]["pod-1"]
    assert entry["status"] == "restarted" and code == 2
    assert entry["boot"]["outcome"] == "pending" and entry["boot"]["errors"] == []
    run = apply(fleet, "--limit", "pod-1", env=api)
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-1", "bash -lc 'echo $HF_TOKEN'") == "hf_old_image_secret\n"
    assert _check(fleet, api, tmp_path, "--limit", "pod-1")[0] == 0


def test_the_watch_puts_a_restarted_pod_back(fleet, api, converged):
    container.restart("pod-2")
    assert fleet.ssh("pod-2", "podstate-ready").returncode != 0
    watched = run(fleet, [str(BIN / "podstate"), "watch", "--json", "--once"], env=api)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    applies = [(e["pod"], e["seen"], e["result"]) for e in events if e["action"] == "apply"]
    assert applies == [("pod-2", "restarted", "started"), ("pod-2", "restarted", "ok")], events
    assert fleet.out("pod-2", "bash -lc 'echo $HF_TOKEN'") == "hf_old_image_secret\n"
    assert fleet.ssh("pod-2", "podstate-ready").returncode == 0


def _activity(fleet, api, tmp_path) -> dict:
    """Return pod-1's entry in the check's report."""
    return _check(fleet, api, tmp_path, "--limit", "pod-1")[1]["pods"]["pod-1"]


def test_the_idle_reading_sees_a_quiet_pod_and_a_cpu_job(fleet, api, converged, tmp_path):
    for _ in range(3):  # the first checks begin the idle period anew for what ended
        quiet = _activity(fleet, api, tmp_path)
        if quiet["idle"] is True:
            break
    assert quiet["idle"] is True, quiet["activity"]
    assert [g["utilization"] for g in quiet["activity"]["gpus"]] == [0, 0]
    pid = fleet.out(
        "pod-1", "nohup sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!"
    )
    pid = pid.strip()
    try:
        busy = _activity(fleet, api, tmp_path)
    finally:
        fleet.out("pod-1", f"kill {pid}; while [ -e /proc/{pid} ]; do sleep 0.1; done")
    assert busy["idle"] is False
    assert f"process sh (pid {pid}) started since the idle period began" in str(
        busy["activity"]["in_use"]
    )


@pytest.mark.parametrize(
    "version,wanted",
    [
        ("1:10.0p2-7+deb13u4", True),
        ("1:9.8p1-1", True),
        ("1:8.4p1-5+deb11u3", False),
        (None, False),
    ],
)
def test_an_image_sshd_gets_the_options_its_own_version_knows(tmp_path, version, wanted):
    from podstate.sandbox.prepare import openssh_at_least

    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    record = "Package: openssh-client\nStatus: install ok installed\nVersion: 1:11.0p1-1\n\n"
    if version:
        record += f"Package: openssh-server\nStatus: install ok installed\nVersion: {version}\n"
    (tmp_path / "var/lib/dpkg/status").write_text(record)
    assert openssh_at_least(tmp_path, (9, 8)) is wanted
