"""End to end: a user's ~/.bashrc and ~/.ssh/authorized_keys whose podstate block was
half deleted by hand keep every line of the user's through an apply over real SSH, and the
user is told, with the file and the line, why podstate cannot mend the block.
"""

import json

import pytest

from podstate.roles import authorized_keys as ak
from podstate.roles import env
from tests.e2e import apply, check

SANDBOX = {"pods": 1}
POD = "pod-1"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@b"
MINE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine mine@pc"
USERS = "conda activate base\nexport PATH=/opt/conda/bin:$PATH\n"


@pytest.fixture(scope="module")
def half_deleted(fleet, tmp_path_factory):
    """Apply once; then the user deletes the end mark of the last block of ~/.bashrc and of
    the keys block, adds lines of their own after each, and podstate checks and applies."""
    fleet.group_vars("all", {"authorized_keys": [KEY]}, merge=True)
    first = apply(fleet)
    assert first.returncode == 0, first.stderr
    for path, end in (("~/.bashrc", env.MARK_END), ("~/.ssh/authorized_keys", ak.MARK_END)):
        fleet.out(POD, f"sed -i '$!b; /^{end}/d' {path}")  # the file's last line: the end mark
    fleet.out(POD, f"printf '%s' '{USERS}' >> ~/.bashrc && echo '{MINE}' >> ~/.ssh/authorized_keys")
    bashrc = fleet.out(POD, "cat ~/.bashrc")
    keys = fleet.out(POD, "cat ~/.ssh/authorized_keys")
    report = tmp_path_factory.mktemp("check") / "report.json"
    drift = check(fleet, "--json", str(report))
    found = json.loads(report.read_text())["pods"][POD]
    return fleet, bashrc, keys, drift, found, apply(fleet)


def _line(text: str, mark: str) -> int:
    """Return the number of the last line of ``text`` that starts with ``mark``."""
    return max(n for n, line in enumerate(text.split("\n"), 1) if line.startswith(mark))


def test_the_users_lines_after_the_half_deleted_block_are_kept(half_deleted):
    fleet, bashrc, *_ = half_deleted
    after = fleet.out(POD, "cat ~/.bashrc")
    assert after.startswith(env.HOOK) and after.endswith(USERS + env.HOOK)
    assert after.count(env.MARK_BEGIN) == 2  # the lone begin mark alone went
    kept = bashrc.splitlines(keepends=True)
    del kept[_line(bashrc, env.MARK_BEGIN) - 1]
    assert after == env.render_hooks("".join(kept))


def test_the_users_key_after_the_half_deleted_keys_block_is_kept(half_deleted):
    fleet, _, keys, *_ = half_deleted
    after = fleet.out(POD, "cat ~/.ssh/authorized_keys")
    assert after.endswith(f"{ak.MARK_END}\n{KEY}\n{MINE}\n")


def test_the_check_and_the_apply_say_which_line_lost_its_mark(half_deleted):
    _, bashrc, keys, drift, found, run = half_deleted
    assert drift.returncode == 1 and found["status"] == "violation"
    said = {v["id"]: v["message"] for v in found["violations"]}
    assert said["env.block"].startswith(
        f"podstate's block in ~/.bashrc has lost its end mark: line {_line(bashrc, env.MARK_BEGIN)}"
    )
    assert "podstate cannot tell that block's lines from yours" in said["env.block"]
    assert f"line {_line(keys, ak.MARK_BEGIN)} begins it" in said["authorized_keys.block"]
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "env.block" in run.stderr and "~/.bashrc has lost its end mark" in run.stderr


def test_the_next_apply_finds_nothing_to_mend(half_deleted):
    fleet, *_ = half_deleted
    before = fleet.out(POD, "cat ~/.bashrc ~/.ssh/authorized_keys")
    again = apply(fleet)
    assert again.returncode == 0, again.stderr
    assert fleet.out(POD, "cat ~/.bashrc ~/.ssh/authorized_keys") == before
