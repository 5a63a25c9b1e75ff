"""What podstate made leaves the pod when it leaves the desired state: the record of what it
made (podstate.facts.made), removal in the plan (roles/removal.py), reported by the check.

Unit tests cover the record's format and the block's removal; end-to-end tests apply a full
desired state to sandbox pods (pod-1: sshfs volume, pod-2: local volume), then take each
section out in turn: the check names each removal before the apply, and ``ok`` after.
"""

from __future__ import annotations

import base64
import difflib
import json

import pytest

from podstate.facts import made
from podstate.sandbox import container
from roles.removal import STUB, take_block
from tests.e2e import BIN, apply, check, run
from tests.fixtures.venv.wheels import tar_bytes, wheelhouse
from tests.record_entries import entry as line_entry
from tests.test_repos import MAKE_ORIGIN

SANDBOX = {"pods": 2}
TOKEN_VAR = "PODSTATE_TEST_REMOVAL_TOKEN"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@b"
FULL = {
    "shm": {"min_size": "32M"},
    "env": {"PODSTATE_REMOVAL": "yes"},
    "files": {
        "/etc/podstate-test/new.conf": {"content": "made by podstate\n"},
        "/etc/motd-test": {"content": "podstate's motd\n"},
        "/workspace/notes/podstate.txt": {"content": "on the volume\n"},
    },
    "authorized_keys": [KEY],
    "secrets": {"HF_TOKEN": {"from_env": TOKEN_VAR}},
    "boot": {"hook": True, "host_keys": "keep"},
    "scratch": {"/scratch-full": {"size": "64M"}},  # a directory: these pods cannot mount
    "repos": {"/root/full-code": {"url": "file:///srv/git/full.git", "ref": "v1.0"}},
    "venv": {
        "path": "/opt/full-venv",
        "packages": ["tinyapp"],
        "find_links": ["/workspace/wheels"],
        "no_index": True,
        "snapshot": "/workspace/full-snapshots",
    },
}
HOOK = "/workspace/.podstate/boot.sh"
STATE = "/workspace/.podstate/boot/state"
HOOKED = "/etc/hooked.conf"
TEMPLATE = "bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'"
USER_MOTD = "the user motd, their own\n"


# --- unit tests ---------------------------------------------------------------------------


def test_a_record_reads_back_as_written():
    entries = [
        line_entry("file", "/etc/x y", made.sums("a\n")),
        line_entry("block", "~/.bashrc", "YQ==", "Yg==", "created"),
        line_entry("secrets", "/etc/podstate/secrets/env.sh"),
    ]
    record = made.parse_record(made.render("pod-1", "abc", entries))
    assert (record.problem, record.pod, record.pod_id) == (None, "pod-1", "abc")
    assert record.entries == {e.path: e for e in entries}


@pytest.mark.parametrize(
    "text, problem",
    [
        ("podstate-made 2\npod p i\n", "from a newer podstate (version 2)"),
        ("hello\n", "not a podstate record"),
        ("podstate-made 1\n", "names no pod"),
        ("podstate-made 1\npod =p =i\nrmrf =/\n", "entry podstate cannot read (rmrf)"),
    ],
)
def test_a_record_podstate_cannot_use_says_why_and_names_nothing(text, problem):
    record = made.parse_record(text)
    assert problem in record.problem and record.entries == {}


def test_taking_the_block_out_leaves_every_other_line():
    text = "# >>> p\nx\n# <<< p\nalias a=b\n\n# >>> p\nx\n# <<< p\ntail\n"
    assert take_block(text, "# >>> p", "# <<< p") == "alias a=b\n\ntail\n"


@pytest.mark.parametrize(
    "text", ["# >>> p\nx\nkey of the user\n", "# >>> p\nx\n# <<< p\nkey\n# >>> p\nx\n"]
)
def test_a_block_without_its_end_mark_is_not_taken_out(text):
    assert take_block(text, "# >>> p", "# <<< p") is None


# --- end to end ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(fleet, tmp_path_factory) -> dict:
    """The environment of a user whose pods come from the (sandbox's) RunPod API, which
    vouches for the host keys a restart makes."""
    return fleet.api_env(tmp_path_factory.mktemp("hostkeys"))


def _apply(fleet, api) -> None:
    run = apply(fleet, env=api)
    assert run.returncode == 0, run.stderr


def _report(fleet, api, tmp_path) -> dict:
    """Return the check's JSON report; its text, JUnit and Markdown reports are checked to
    name every removal the JSON one does."""
    out, xml, md = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md"
    result = check(fleet, "--json", str(out), "--junit", str(xml), "--markdown", str(md), env=api)
    assert out.exists(), result.stderr
    report = json.loads(out.read_text())
    for entry in report["pods"].values():
        for change in entry["changes"]:
            if change["operation"].startswith("would "):
                for text in (result.stdout, xml.read_text(), md.read_text()):
                    assert change["operation"].split(":")[0] in text
    return report


def _changes(report: dict, pod: str) -> list[str]:
    return [c["operation"] for c in report["pods"][pod]["changes"]]


def _ok(report: dict) -> None:
    assert report["summary"]["exit_code"] == 0, json.dumps(report["pods"], indent=1)


# Every file, directory and mount a pod's user or its image may have, with each regular
# file's sha256, mode and owner; what a sandbox pod's sshd and the image's start script
# change at every login or start is left out (logs, /run, /tmp, the host keys).
LISTING = (
    "cd / && { find etc root workspace -xdev -path etc/ssh -prune -o"
    " -printf '%p %y %m %U:%G %l\\n';"
    " find . usr/local/bin opt -maxdepth 1 -printf '%p %y %m %U:%G %l\\n'; } | LC_ALL=C sort &&"
    " { find etc root workspace -xdev -path etc/ssh -prune -o -type f -print0;"
    " find usr/local/bin opt -maxdepth 1 -type f -print0; }"
    " | xargs -0 sha256sum | LC_ALL=C sort -k 2"
    " && cut -d ' ' -f 1-3 /proc/self/mounts | LC_ALL=C sort"
)
BEFORE: dict[str, str] = {}


@pytest.fixture(scope="module")
def applied(fleet, api, tmp_path_factory):
    """The fleet after a first apply of the full desired state (pod-1 has a motd of its
    own at the path a ``files`` entry names); each pod's listing before it in BEFORE."""
    api[TOKEN_VAR] = "hf_secret_value"
    fleet.out("pod-1", f"printf '{USER_MOTD}' > /etc/motd-test")
    house = base64.b64encode(tar_bytes(wheelhouse(tmp_path_factory.mktemp("wheels")))).decode()
    for pod in fleet.pods:  # the user's own: a repository to clone, wheels for the venv
        fleet.out(pod, MAKE_ORIGIN.format(bare="/srv/git/full.git"))
        fleet.out(pod, f"mkdir -p /workspace/wheels && echo {house} | base64 -d | "
                       "tar -xzf - -C /workspace/wheels")  # fmt: skip
    for pod in fleet.pods:
        BEFORE[pod] = fleet.out(pod, LISTING)
    fleet.group_vars("all", FULL)
    _apply(fleet, api)
    return fleet


def test_the_record_names_what_podstate_made_and_no_secret(applied):
    text = applied.out("pod-1", f"cat {made.MADE}; stat -c %a {made.MADE}")
    record = made.parse_record(text.rsplit("\n", 2)[0] + "\n")
    assert text.split("\n")[-2] == "600"
    kinds = {path: entry.kind for path, entry in record.entries.items()}
    assert kinds["/etc/podstate-test/new.conf"] == "file"
    assert kinds["/etc/motd-test"] == "saved"
    assert kinds["~/.bashrc"] == "block"
    assert kinds["/etc/podstate/secrets/env.sh"] == "secrets"
    assert "hf_secret_value" not in text
    pod_id = applied.out("pod-1", "tr '\\0' '\\n' </proc/1/environ | sed -n s/^RUNPOD_POD_ID=//p")
    volume = applied.out("pod-1", f"cat /workspace/.podstate/made/{pod_id.strip()}")
    on_volume = made.parse_record(volume).entries
    assert on_volume["/workspace/.podstate/boot.sh"].kind == "hook"
    assert on_volume["/workspace/notes/podstate.txt"].kind == "file"


def test_each_section_removed_is_drift_then_gone(applied, api, tmp_path):
    fleet = applied
    _ok(_report(fleet, api, tmp_path))
    desired = dict(FULL)

    # files: the file podstate created goes, the user's motd comes back
    desired["files"] = {}
    fleet.group_vars("all", desired)
    report = _report(fleet, api, tmp_path)
    changes = report["pods"]["pod-1"]["changes"]
    gone = [c for c in changes if c["operation"] == "would remove: /etc/podstate-test/new.conf"]
    assert gone and "-made by podstate" in gone[0]["diff"]
    back = [c for c in changes if c["operation"].startswith("would put back: /etc/motd-test")]
    assert back and f"+{USER_MOTD.strip()}" in back[0]["diff"]
    assert "would remove: /workspace/notes/podstate.txt" in _changes(report, "pod-2")
    _apply(fleet, api)
    assert fleet.out("pod-1", "cat /etc/motd-test") == USER_MOTD
    assert fleet.ssh("pod-1", "test -e /etc/podstate-test/new.conf").returncode == 1
    assert fleet.ssh("pod-2", "test -e /workspace/notes/podstate.txt").returncode == 1
    _ok(_report(fleet, api, tmp_path))

    # authorized_keys: the block goes, the keys before it stay
    before = fleet.out("pod-1", "cat ~/.ssh/authorized_keys")
    del desired["authorized_keys"]
    fleet.group_vars("all", desired)
    assert "would remove: podstate's block in ~/.ssh/authorized_keys" in _changes(
        _report(fleet, api, tmp_path), "pod-1"
    )
    _apply(fleet, api)
    after = fleet.out("pod-1", "cat ~/.ssh/authorized_keys")
    assert KEY not in after and after == _without_keys_block(before)
    _ok(_report(fleet, api, tmp_path))

    # secrets: the file goes, with its directory
    del desired["secrets"]
    fleet.group_vars("all", desired)
    assert any("the secrets file" in c for c in _changes(_report(fleet, api, tmp_path), "pod-1"))
    _apply(fleet, api)
    assert fleet.ssh("pod-1", "test -e /etc/podstate/secrets").returncode == 1
    _ok(_report(fleet, api, tmp_path))

    # env (and every other section the profile is made of): the profile and its hooks go
    del desired["env"]
    desired.update(nccl={"p2p": "leave", "ib": "leave"})
    fleet.group_vars("all", desired)
    changes = _changes(_report(fleet, api, tmp_path), "pod-1")
    assert "would remove: /etc/profile.d/podstate.sh" in changes
    assert "would remove: podstate's block in ~/.bashrc" in changes
    _apply(fleet, api)
    assert "podstate" not in fleet.out("pod-1", "cat ~/.bashrc")
    assert fleet.ssh("pod-1", "test -e /etc/profile.d/podstate.sh").returncode == 1
    _ok(_report(fleet, api, tmp_path))


def test_a_removed_boot_hook_is_disarmed_and_puts_nothing_back_at_a_restart(applied, api, tmp_path):
    fleet = applied
    hooked = {"shm": FULL["shm"], "boot": FULL["boot"], "files": {HOOKED: {"content": "x\n"}}}
    fleet.group_vars("all", hooked)
    _apply(fleet, api)
    _ok(_report(fleet, api, tmp_path))
    assert HOOKED in fleet.out("pod-1", f"cat {STATE}")  # what the armed hook puts back

    fleet.group_vars("all", {"shm": FULL["shm"]})
    changes = _changes(_report(fleet, api, tmp_path), "pod-1")
    assert f"would remove: {HOOKED}" in changes
    disarm = [c for c in changes if c.startswith(f"Disarm the boot hook {HOOK}")]
    assert disarm and "start command can drop it" in disarm[0]
    assert "would remove: the boot hook's data in /workspace/.podstate/boot" in changes
    assert "would remove: the archived host keys in /workspace/.podstate/boot" in changes
    _apply(fleet, api)
    assert fleet.out("pod-1", f"cat {HOOK}") == STUB
    assert fleet.out("pod-1", f"bash -c '. {HOOK}; echo $?'") == "0\n"
    assert fleet.ssh("pod-1", "test -e /workspace/.podstate/boot").returncode == 1
    _ok(_report(fleet, api, tmp_path))

    container.set_start_command("pod-1", "exec " + TEMPLATE)  # as RunPod's template runs it
    container.restart("pod-1")
    assert fleet.ssh("pod-1", f"test -e {HOOKED}").returncode == 1  # nothing was put back
    assert fleet.ssh("pod-1", "test -e /etc/podstate").returncode == 1
    _apply(fleet, api)
    _ok(_report(fleet, api, tmp_path))
    assert fleet.out("pod-1", f"cat {HOOK}") == STUB  # until uninstall


def _without_keys_block(text: str) -> str:
    return take_block(
        text, "# >>> podstate authorized_keys >>>", "# <<< podstate authorized_keys <<<"
    )


def test_uninstall_leaves_each_pod_as_it_was_before_the_first_apply(applied, api, tmp_path):
    fleet = applied
    # the user's motd, which pod-1's restart (test above) wiped with its container disk,
    fleet.out("pod-1", f"[ -e /etc/motd-test ] || printf '{USER_MOTD}' > /etc/motd-test")
    fleet.out("pod-1", MAKE_ORIGIN.format(bare="/srv/git/full.git"))  # and the origin
    fleet.group_vars("all", FULL)
    _apply(fleet, api)
    _ok(_report(fleet, api, tmp_path))
    assert fleet.out("pod-2", LISTING) != BEFORE["pod-2"]

    dry = run(fleet, [str(BIN / "podstate"), "uninstall", "--dry-run"], env=api)
    assert dry.returncode == 2, dry.stdout + dry.stderr
    for gone in (
        "would remove: /etc/podstate-test/new.conf",
        "would put back: /etc/motd-test",
        "would remove: /workspace/.podstate/boot.sh",
        "would remove: podstate's block",
    ):
        assert gone in dry.stdout, dry.stdout
    assert fleet.out("pod-2", "test -e /etc/podstate-test/new.conf && echo there") == "there\n"

    done = run(fleet, [str(BIN / "podstate"), "uninstall"], env=api)
    assert done.returncode == 0, done.stdout + done.stderr
    for pod in fleet.pods:
        after = fleet.out(pod, LISTING)
        assert after == BEFORE[pod], "".join(
            difflib.unified_diff(BEFORE[pod].splitlines(True), after.splitlines(True))
        )
    again = run(fleet, [str(BIN / "podstate"), "uninstall", "--dry-run"], env=api)
    assert again.returncode == 0, again.stdout  # nothing left to remove

    fleet.group_vars("all", {})
    _ok(_report(fleet, api, tmp_path))
