"""The boot hook (boot: {hook: true}): a restarted pod comes back in state by itself.

Unit tests cover the hook's data and status, its rendering of the shell hooks against the
env role's, and the spec. End-to-end tests restart sandbox pods whose start command is
RunPod's template command (``bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'``,
exec'd as the container's command) and look at them before any push: pod-1 (COMMUNITY,
2 GPUs over PCIe, sshfs volume) with pending secrets and keys; pod-2 (local volume) with
kept host keys through the pods file; pod-3 (sshfs volume) with corrupt data, another
pod's volume, a missing and a broken hook; pod-4 (may mount: tmpfs scratch) with a venv
restored from its snapshot in the background, and a corrupt snapshot.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest

from podstate.desired.errors import SpecError
from podstate.desired.state import Boot
from podstate.inventory.fleet import desired
from podstate.operations import boot as boot_ops
from podstate.roles import env
from podstate.run import lock
from podstate.sandbox import container
from podstate.shell import script_file
from tests.e2e import ROOT, apply, check, exec_count, junit_errors
from tests.fixtures.venv.wheels import tar_bytes, wheelhouse
from tests.test_runpod import served_key

SANDBOX = {"pods": 4}
REPORT_SCHEMA = json.loads((ROOT / "schema/check-report.schema.json").read_text())
TEMPLATE = "bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'"
# A stand-in for what RunPod's start script starts (Jupyter): /post_start.sh, which it runs,
# keeps its environment and a child that stays.
CHILD = "printf '%s\\n' 'env > /tmp/child.env; sleep 600 &' > /post_start.sh\n"
# The sync part's time: the start command notes the time around the sourced hook.
TIMED = (
    "exec bash -c 't=$(date +%s%N); . /workspace/.podstate/boot.sh; "
    'echo "$t $(date +%s%N)" > /workspace/boot-times; exec /start.sh\''
)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@b"
STATE = "/workspace/.podstate/boot/state"
BASE = {"shm": {"min_size": "32M"}, "boot": {"hook": True}}


# --- unit tests ---------------------------------------------------------------------------


def test_the_data_file_is_checksummed_and_names_its_pod():
    text = boot_ops.render_state("pod-1", "abc123", ["dir - /scratch/x\n"])
    lines = text.splitlines()
    assert lines[:3] == ["podstate-boot 1", "pod pod-1 abc123", "dir - /scratch/x"]
    body = "".join(line + "\n" for line in lines[:-1])
    assert lines[-1] == "sum " + __import__("hashlib").sha256(body.encode()).hexdigest()
    assert boot_ops.state_pod(text) == "pod-1"
    assert boot_ops.render_state("p", None, []).splitlines()[1] == "pod p -"
    assert boot_ops.state_pod("something else\n") is None and boot_ops.state_pod(None) is None


def test_whole_lines_are_held_as_they_are_after_the_entries():
    texts = ["export A=1\n", "[user]\n\tname = Pod\n"]
    entries = ["text 1 644 /etc/a\n", "guarded-text 2 644 /root/b\nQUJD\n", "marker x\n"]
    text = boot_ops.render_state("pod-1", "abc", entries, texts)
    assert text.split("contents 3\n")[1].startswith("".join(texts) + "sum ")
    assert [boot_ops.is_text(t) for t in ("a\n", "a", "", "a\0b\n", "\n")] == [
        True, False, False, False, True
    ]  # fmt: skip


def test_the_status_says_what_the_hook_did():
    parse = boot_ops.parse_status
    assert parse("start T\npod p i\nskipped it is for pod q\n")["outcome"] == "skipped"
    assert parse("start T\nrunning venv from x\n")["outcome"] == "running"
    assert parse("start T\nrestored file /x\ndone T2 ready\n") == {
        "outcome": "restored",
        "reason": None,
        "pending": [],
        "errors": [],
        "started_at": "T",
    }
    found = parse("start T\npending secrets: s\nerror venv: bad\ndone T2 pending\n")
    assert (found["outcome"], found["pending"], found["errors"]) == (
        "pending",
        ["secrets: s"],
        ["venv: bad"],
    )


def _awk_program() -> str:
    match = re.search(
        r"awk -v b=\"\$1\" -v e=\"\$2\" -v lone=\"\$work_dir/lone\" '(.*?)' \"\$3\"",
        script_file("boot.sh"),
        re.S,
    )
    assert match, "the hook renders the shell hooks with awk"
    return match[1]


@pytest.mark.parametrize(
    "current",
    [
        "",
        "# ~/.bashrc\nalias ll='ls -l'\n",
        "\n\n# leading blank lines\n\nmiddle\n\n\n",
        "no final newline",
        env.HOOK + "mine\n" + env.HOOK + "source /etc/rp_environment\n",
        "a\n" + env.HOOK + "b\n" + env.MARK_END + " stray end\n",
    ],
)
def test_the_hook_hooks_a_shell_file_as_the_env_role_renders_it(tmp_path, current):
    path = tmp_path / "bashrc"
    path.write_text(current)
    body = subprocess.run(
        ["awk", "-v", f"b={env.MARK_BEGIN}", "-v", f"e={env.MARK_END}", "-v", "lone=/dev/null"]
        + [_awk_program(), path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert env.HOOK + body + env.HOOK == env.render_hooks(current)


def test_a_hooked_file_that_runpods_start_script_appended_to_is_left_alone_while_unchanged():
    hooked = env.render_hooks("# mine\n")
    after = hooked + env.RUNPOD_LINE
    assert env.render_hooks(after, keep_runpod_tail=True) == after
    assert env.render_hooks(after) == env.HOOK + "# mine\n" + env.RUNPOD_LINE + env.HOOK
    assert env.render_hooks("# mine\n" + env.RUNPOD_LINE, keep_runpod_tail=True) == hooked.replace(
        "# mine\n", "# mine\n" + env.RUNPOD_LINE
    )


def test_the_hook_names_itself_and_the_files_podstate_writes():
    hook = boot_ops.render_hook(boot_ops.Layout("/vol"))
    assert "_podstate_boot=/vol/.podstate/boot.sh\n" in hook
    assert f". {env.PROFILE}\n" in hook  # what the start command's shell takes in
    assert boot_ops.Layout("/vol").start_command() == (
        "bash -c '. /vol/.podstate/boot.sh; exec /start.sh'"
    )


def test_the_venv_restore_takes_the_pod_lock_with_the_hooks_own_token():
    from podstate.operations.venv import Venv
    from podstate.roles.boot import restore_command

    want = Venv(path="/opt/venv", fingerprint="f" * 64, record="{}", python="/usr/bin/python3",
                installer="uv", requirements="x\n")  # fmt: skip
    command = restore_command(want, "/workspace/snap shot")
    assert lock.TOKEN not in command and '"$podstate_token"' in command
    assert "'podstate boot hook'" in command and lock.OWNER not in command


def test_spec_boot_keys_need_the_hook():
    assert desired({"boot": {"hook": True}}).boot == Boot(
        hook=True, host_keys="new", volume="/workspace"
    )
    with pytest.raises(SpecError, match="boot.host_keys: keep needs boot.hook: true"):
        desired({"boot": {"host_keys": "keep"}})
    with pytest.raises(SpecError, match=r"boot.host_keys: 'yes' is not one of: keep, new"):
        desired({"boot": {"hook": True, "host_keys": "yes"}})
    # what the hook puts back is written in one command, like every managed file
    large = {"boot": {"hook": True}, "env": {f"V{i}": "x" * 16000 for i in range(3)}}
    with pytest.raises(SpecError, match=r"boot.hook: the hook's data would hold about \d+ bytes"):
        desired(large)
    assert desired({**large, "boot": {"hook": False}}).env  # fine without the hook


# --- end to end ---------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def token():
    """The secret pod-1 declares, in the environment of every run of this module."""
    os.environ["BOOT_TEST_TOKEN"] = "t0ken"
    yield
    del os.environ["BOOT_TEST_TOKEN"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The host-key store of the API inventory's user, kept for the whole module."""
    return tmp_path_factory.mktemp("hostkeys")


def report(
    fleet, tmp_path, env_: dict, pod: str
) -> tuple[subprocess.CompletedProcess, dict, str, str]:
    """Run the check of ``pod`` through the RunPod API; return it and its JSON, JUnit and
    Markdown."""
    out, xml, md = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md"
    result = check(
        fleet, "--limit", pod, "--json", str(out), "--junit", str(xml), "--markdown", str(md),
        env=env_,
    )  # fmt: skip
    assert "Traceback" not in result.stdout + result.stderr
    document = json.loads(out.read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    assert junit_errors(xml) == []
    return result, document, xml.read_text(), md.read_text()


def restart(pod: str, command: str | None = "exec " + TEMPLATE) -> None:
    container.set_start_command(pod, command)
    container.restart(pod)


def test_a_restart_with_the_hook_is_in_state_before_the_first_connection(fleet, store, tmp_path):
    fleet.host_vars(
        "pod-1",
        {**BASE, "secrets": {"BOOT_TOKEN": {"from_env": "BOOT_TEST_TOKEN"}},
         "authorized_keys": [KEY]},
    )  # fmt: skip
    api = fleet.api_env(store)
    run = apply(fleet, "--limit", "pod-1", env=api)
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-1", f"stat -c %a {STATE} /workspace/.podstate/boot") == "600\n700\n"

    restart("pod-1", CHILD + TIMED)

    # The first connection: ssh pod CMD, a login and an interactive shell
    declared = "/scratch/pip /scratch/tmp 1"
    assert fleet.out("pod-1", "echo $PIP_CACHE_DIR $TMPDIR $NCCL_P2P_DISABLE").strip() == declared
    shown = "echo \\$PIP_CACHE_DIR \\$TMPDIR \\$NCCL_P2P_DISABLE"
    assert fleet.out("pod-1", f'bash -lc "{shown}"').strip() == declared
    assert fleet.ssh("pod-1", f'bash -ic "{shown}"').stdout.strip() == declared
    assert fleet.out("pod-1", "stat -c %a /scratch/tmp") == "1777\n"
    # ... after RunPod's start script appended its line, and wrote the values it was given
    assert fleet.out("pod-1", "tail -n 1 ~/.bashrc") == "source /etc/rp_environment\n"
    assert 'export PIP_CACHE_DIR="/scratch/pip"\n' in fleet.out("pod-1", "cat /etc/rp_environment")
    # what the start script started has them too
    child = fleet.out("pod-1", "cat /tmp/child.env").splitlines()
    assert {"PIP_CACHE_DIR=/scratch/pip", "TMPDIR=/scratch/tmp", "NCCL_P2P_DISABLE=1"} <= set(child)
    assert not [line for line in child if line.lower().startswith(("_podstate", "podstate_boot"))]
    # secrets are never on the volume: pending, and so no marker
    assert fleet.out("pod-1", "echo ${BOOT_TOKEN:-unset}") == "unset\n"
    assert fleet.ssh("pod-1", "podstate-ready").returncode == 1
    assert fleet.ssh("pod-1", f"grep -r t0ken /workspace/.podstate {STATE}").returncode == 1

    result, document, xml, md = report(fleet, tmp_path, api, "pod-1")
    entry = document["pods"]["pod-1"]
    assert entry["status"] == "restarted", result.stdout
    boot = entry["boot"]
    assert boot["outcome"] == "pending" and boot["errors"] == []
    assert [item.split(":")[0] for item in boot["pending"]] == ["secrets", "authorized_keys"]
    # everything else is back as the roles render it: only the pending items and the marker
    roles = [c["role"] for c in entry["changes"]]
    assert roles == ["Secrets", "Authorized keys", "Ready"], entry["changes"]
    assert entry["violations"] == []  # the start script's child has the declared values
    assert "boot hook left for the next apply: secrets" in result.stdout
    assert 'name="Boot hook"' in xml and "**boot** boot hook left for the next apply" in md

    run = apply(fleet, "--limit", "pod-1", env=api)
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-1", "bash -lc 'echo $BOOT_TOKEN'") == "t0ken\n"
    result, document, _, _ = report(fleet, tmp_path, api, "pod-1")
    assert result.returncode == 0, result.stdout
    assert document["pods"]["pod-1"]["boot"]["pending"] == []  # done by the push


def test_kept_host_keys_survive_a_restart_and_need_no_new_trust(fleet, store, tmp_path):
    fleet.host_vars(
        "pod-2",
        {**BASE, "boot": {"hook": True, "host_keys": "keep"},
         "packages": {"apt": ["bash"]},  # in the image: nothing pending
         "files": {"/root/.gitconfig": {"content": "[user]\n\tname = Pod\n"},
                   "/workspace/notes": {"content": "kept by the volume\n"}}},
    )  # fmt: skip
    api = fleet.api_env(store)
    before = exec_count(fleet, "pod-2")
    run = apply(fleet, "--limit", "pod-2", "-v", env=api)
    assert run.returncode == 0, run.stderr
    # the probe, then every change in one command: the hook with its data, the kept keys,
    # the files and the records of what podstate made (each file write's script once)
    assert exec_count(fleet, "pod-2") - before == 2
    port = json.loads((fleet.state / "pods.json").read_text())["pod-2"]["port"]
    key = served_key(port)
    assert fleet.out("pod-2", "stat -c %a /workspace/.podstate/boot/hostkeys.tar") == "600\n"
    state = fleet.out("pod-2", f"cat {STATE}")
    assert "text 2 644 /root/.gitconfig\n" in state and "/workspace/notes" not in state

    restart("pod-2", TIMED)

    assert served_key(port) == key
    assert fleet.ssh("pod-2", "podstate-ready").returncode == 0  # nothing was pending
    assert (
        fleet.out("pod-2", "stat -c %a ~/.gitconfig && cat ~/.gitconfig")
        == "644\n[user]\n\tname = Pod\n"
    )
    result, document, _, _ = report(fleet, tmp_path, api, "pod-2")
    entry = document["pods"]["pod-2"]
    assert entry["status"] == "ok", result.stdout
    assert entry["host_key"]["trust"] == "known" and entry["ready"] is True
    assert entry["boot"]["outcome"] == "restored"
    # through the pods file too: the key it knows, and nothing to do, for the probe alone
    before = exec_count(fleet, "pod-2")
    run = apply(fleet, "--limit", "pod-2")
    assert run.returncode == 0, run.stderr
    assert run.hosts("success") == set()
    assert exec_count(fleet, "pod-2") - before == 1
    sync = [int(t) for t in fleet.out("pod-2", "cat /workspace/boot-times").split()]
    ready = int(fleet.out("pod-2", "date -r /etc/podstate/ready +%s%N"))
    print(f"\nboot hook, pod-2: sync {(sync[1] - sync[0]) / 1e6:.0f} ms, ready after "
          f"{(ready - sync[0]) / 1e6:.0f} ms")  # fmt: skip
    assert sync[1] - sync[0] < 10e9  # within the hook's own limit


def _booted_without_state(fleet, pod: str) -> None:
    """The pod started, and the hook put nothing back."""
    assert fleet.out(pod, "hostname") == f"{pod}\n"
    assert fleet.ssh(pod, f"test -e {env.PROFILE}").returncode == 1
    shell = fleet.ssh(pod, 'bash -ic "echo \\$PIP_CACHE_DIR"').stdout
    assert shell == "/workspace/.cache/pip\n"  # the image's, from /etc/rp_environment


def test_a_corrupt_data_file_boots_the_pod_and_the_check_says_why(fleet, store, tmp_path):
    fleet.host_vars("pod-3", BASE)
    api = fleet.api_env(store)
    assert apply(fleet, "--limit", "pod-3", env=api).returncode == 0
    fleet.out("pod-3", f"sed -i 's/^scratch dir /scratch tmpfs /' {STATE}")

    restart("pod-3", "exec " + TEMPLATE.replace("bash -c", "bash -ec"))  # even under set -e

    _booted_without_state(fleet, "pod-3")
    result, document, xml, md = report(fleet, tmp_path, api, "pod-3")
    entry = document["pods"]["pod-3"]
    assert entry["status"] == "restarted"
    assert entry["boot"]["outcome"] == "skipped"
    assert "does not match its checksum: nothing was restored" in entry["boot"]["reason"]
    assert "boot hook did nothing at this container's start: the hook's data" in result.stdout
    assert re.search(r'name="Boot hook"><failure [^>]*type="boot"', xml)
    assert "does not match its checksum" in fleet.out(
        "pod-3", "cat /workspace/.podstate/boot/status"
    )
    assert apply(fleet, "--limit", "pod-3", env=api).returncode == 0
    assert check(fleet, "--limit", "pod-3", env=api).returncode == 0


def test_the_volume_of_another_pod_is_left_alone(fleet, store, tmp_path):
    api = fleet.api_env(store)
    other = fleet.out("pod-1", f"cat {STATE}").encode()
    fleet.out("pod-3", f"cat > {STATE}", other)
    pod_1 = json.loads((fleet.state / "pods.json").read_text())["pod-1"]["pod_id"]

    restart("pod-3")

    _booted_without_state(fleet, "pod-3")
    _, document, _, _ = report(fleet, tmp_path, api, "pod-3")
    boot = document["pods"]["pod-3"]["boot"]
    assert boot["outcome"] == "skipped"
    assert f"is for pod pod-1 ({pod_1}), not this one (RUNPOD_POD_ID=" in boot["reason"]
    assert apply(fleet, "--limit", "pod-3", env=api).returncode == 0


@pytest.mark.parametrize("hook", [None, "if then ( fi\n"])
def test_a_missing_or_broken_hook_never_stops_the_start(fleet, store, tmp_path, hook):
    api = fleet.api_env(store)
    assert apply(fleet, "--limit", "pod-3", env=api).returncode == 0
    if hook is None:
        fleet.out("pod-3", "rm /workspace/.podstate/boot.sh")
    else:
        fleet.out("pod-3", "cat > /workspace/.podstate/boot.sh", hook.encode())

    restart("pod-3")

    _booted_without_state(fleet, "pod-3")
    result, document, _, _ = report(fleet, tmp_path, api, "pod-3")
    boot = document["pods"]["pod-3"]["boot"]
    assert boot["outcome"] == "not-run", result.stdout
    assert TEMPLATE in boot["reason"]
    assert "boot hook did not run at this container's start" in result.stdout
    assert apply(fleet, "--limit", "pod-3", env=api).returncode == 0


def test_a_venv_comes_back_from_its_snapshot_in_the_background(fleet, store, tmp_path):
    api = fleet.api_env(store)
    house = base64.b64encode(tar_bytes(wheelhouse(tmp_path / "wheels"))).decode()
    fleet.out("pod-4", f"mkdir -p /workspace/wheels && echo {house} | base64 -d | "
                       "tar -xzf - -C /workspace/wheels")  # fmt: skip
    snapshot = "/workspace/.podstate/venv"
    venv = {"path": "/opt/venv", "packages": ["tinyapp"], "find_links": ["/workspace/wheels"],
            "no_index": True, "snapshot": snapshot}  # fmt: skip
    fleet.host_vars("pod-4", {**BASE, "venv": venv})
    run = apply(fleet, "--limit", "pod-4", env=api)
    assert run.returncode == 0, run.stderr

    restart("pod-4", TIMED)

    assert fleet.out("pod-4", "stat -f -c %T /scratch") == "tmpfs\n"  # this pod may mount
    waited = fleet.ssh("pod-4", "podstate-ready --wait 120")
    assert waited.returncode == 0, waited.stderr
    tiny = "/opt/venv/bin/python -c 'import tinyapp; print(tinyapp.__name__)'"
    assert fleet.out("pod-4", tiny) == "tinyapp\n"
    status = fleet.out("pod-4", "cat /etc/podstate/boot")
    assert "restored venv\n" in status and status.endswith(" ready\n")
    sync = [int(t) for t in fleet.out("pod-4", "cat /workspace/boot-times").split()]
    ready = int(fleet.out("pod-4", "date -r /etc/podstate/ready +%s%N"))
    print(f"\nboot hook, pod-4 with a venv: sync {(sync[1] - sync[0]) / 1e6:.0f} ms, ready "
          f"after {(ready - sync[0]) / 1e6:.0f} ms")  # fmt: skip
    result, document, _, _ = report(fleet, tmp_path, api, "pod-4")
    assert result.returncode == 0, result.stdout
    assert document["pods"]["pod-4"]["boot"]["outcome"] == "restored"

    # A corrupt snapshot: the pod boots with everything else, the venv is left pending
    archive = fleet.out("pod-4", f"cat {snapshot}/current").split()[1]
    size = int(fleet.out("pod-4", f"stat -c %s {snapshot}/{archive}"))
    fleet.out("pod-4", f"truncate -s {size // 2} {snapshot}/{archive}")
    restart("pod-4")
    fleet.out("pod-4", "until grep -q '^done ' /etc/podstate/boot; do sleep 0.1; done")
    assert fleet.ssh("pod-4", "podstate-ready").returncode == 1
    assert fleet.out("pod-4", "echo $PIP_CACHE_DIR") == "/scratch/pip\n"
    result, document, _, _ = report(fleet, tmp_path, api, "pod-4")
    boot = document["pods"]["pod-4"]["boot"]
    assert boot["outcome"] == "pending"
    assert boot["pending"] == ["venv: the next apply restores or builds it"]
    assert len(boot["errors"]) == 1
    assert boot["errors"][0].startswith(
        f"venv: podstate: venv snapshot {snapshot}/{archive} is bad"
    )
    run = apply(fleet, "--limit", "pod-4", env=api)
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-4", tiny) == "tinyapp\n"
