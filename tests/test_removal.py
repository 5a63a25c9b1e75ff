"""What podstate made leaves the pod when it leaves the desired state: the record of what it
made (podstate.facts.made), removal in the plan (roles/removal.py), reported by the check.

Unit tests cover the record's format and the block's removal; end-to-end tests apply a full
desired state to sandbox pods (pod-1: sshfs volume, pod-2: local volume), then take each
section out in turn: the check names each removal before the apply, and ``ok`` after.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from podstate.facts import made
from podstate.facts.made import Entry
from roles.removal import take_block
from tests.e2e import apply, check

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
}
USER_MOTD = "the user motd, their own\n"


# --- unit tests ---------------------------------------------------------------------------


def test_a_record_reads_back_as_written():
    entries = [
        Entry("file", "/etc/x y", (made.sums("a\n"),)),
        Entry("block", "~/.bashrc", ("YQ==", "Yg==", "created")),
        Entry("secrets", "/etc/podstate/secrets/env.sh"),
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
        ("podstate-made 1\npod p i\nrmrf Lw==\n", "entry podstate cannot read (rmrf)"),
    ],
)
def test_a_record_podstate_cannot_use_says_why_and_names_nothing(text, problem):
    record = made.parse_record(text)
    assert problem in record.problem and record.entries == {}


def test_taking_the_block_out_leaves_every_other_line():
    text = "# >>> p\nx\n# <<< p\nalias a=b\n\n# >>> p\nx\n# <<< p\ntail\n"
    assert take_block(text, "# >>> p", "# <<< p") == "alias a=b\n\ntail\n"


# --- end to end ---------------------------------------------------------------------------


def _desired(fleet, data: dict) -> None:
    (fleet.vars_dir / "group_vars" / "all.yaml").write_text(yaml.safe_dump(data))


def _report(fleet, tmp_path) -> dict:
    out = tmp_path / "report.json"
    result = check(fleet, "--json", str(out))
    assert out.exists(), result.stderr
    return json.loads(out.read_text())


def _changes(report: dict, pod: str) -> list[str]:
    return [c["operation"] for c in report["pods"][pod]["changes"]]


@pytest.fixture(scope="module")
def applied(fleet):
    """The fleet after a first apply of the full desired state (pod-1 has a motd of its
    own at the path a ``files`` entry names)."""
    os.environ[TOKEN_VAR] = "hf_secret_value"
    fleet.out("pod-1", f"printf '{USER_MOTD}' > /etc/motd-test")
    _desired(fleet, FULL)
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    yield fleet
    os.environ.pop(TOKEN_VAR, None)


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


def test_each_section_removed_is_drift_then_gone(applied, tmp_path):
    fleet = applied
    report = _report(fleet, tmp_path)
    assert report["pods"]["pod-1"]["status"] == "ok", report["pods"]["pod-1"]

    # files: the file podstate created goes, the user's motd comes back
    _desired(fleet, {**FULL, "files": {}})
    report = _report(fleet, tmp_path)
    changes = report["pods"]["pod-1"]["changes"]
    gone = [c for c in changes if c["operation"] == "would remove: /etc/podstate-test/new.conf"]
    assert gone and "-made by podstate" in gone[0]["diff"]
    back = [c for c in changes if c["operation"].startswith("would put back: /etc/motd-test")]
    print(json.dumps(report["pods"]["pod-1"], indent=1))
    assert back and f"+{USER_MOTD.strip()}" in back[0]["diff"]
    assert "would remove: /workspace/notes/podstate.txt" in _changes(report, "pod-2")
    assert apply(fleet).returncode == 0
    assert fleet.out("pod-1", "cat /etc/motd-test") == USER_MOTD
    assert fleet.ssh("pod-1", "test -e /etc/podstate-test/new.conf").returncode == 1
    assert fleet.ssh("pod-2", "test -e /workspace/notes/podstate.txt").returncode == 1
    assert _report(fleet, tmp_path)["summary"]["exit_code"] == 0

    # authorized_keys: the block goes, the keys before it stay
    before = fleet.out("pod-1", "cat ~/.ssh/authorized_keys")
    _desired(fleet, {k: v for k, v in FULL.items() if k not in ("files", "authorized_keys")})
    assert "would remove: podstate's block in ~/.ssh/authorized_keys" in _changes(
        _report(fleet, tmp_path), "pod-1"
    )
    assert apply(fleet).returncode == 0
    after = fleet.out("pod-1", "cat ~/.ssh/authorized_keys")
    assert KEY not in after and after == made_block_out(before)
    assert _report(fleet, tmp_path)["summary"]["exit_code"] == 0


def made_block_out(text: str) -> str:
    return take_block(
        text, "# >>> podstate authorized_keys >>>", "# <<< podstate authorized_keys <<<"
    )
