"""The user's files at the paths ``files`` declares, as a new user meets them on a sandbox pod:
one that held the declared content already is the user's, and stays; one podstate wrote over
comes back as it was (content, mode, owner and group) when it leaves the desired state or at
``podstate uninstall``; one the user edited after podstate wrote over it is left as it is,
and the user's original that podstate kept is named, with where it is, until it is moved."""

from __future__ import annotations

from pathlib import Path

import pytest

from podstate.facts import made
from podstate.facts.files import FileInfo
from podstate.facts.made import MADE, parse_record
from podstate.shell import b64
from roles.files import _entry, copy_of
from tests.e2e import BIN, apply, run
from tests.record_entries import entry as line_entry
from tests.test_removal_faults import _report

SANDBOX = {"pods": 1}
BASE = {"shm": {"min_size": "32M"}}
STAT = "stat -c '%a %u:%g' -- {path}"


# --- unit tests ---------------------------------------------------------------------------

PATH = "/etc/x.conf"
COPY = b64(copy_of(PATH))


@pytest.mark.parametrize(
    "found, was, fields",
    [
        (FileInfo("absent"), None, ("file", made.sums("new\n"))),
        (FileInfo("file", mode="644", owner="0:0", content="new\n"), None, ("found",)),
        (FileInfo("file", mode="600", owner="5:6", content="new\n"), None, ("saved", "600", "5:6")),
        (FileInfo("file", mode="755", owner="5:6", content="old\n"), None, ("saved", "755", "5:6")),
        # a file found earlier is still the user's: saved once podstate writes over it
        (FileInfo("file", mode="644", owner="5:6", content="old\n"), line_entry("found", PATH),
         ("saved", "644", "5:6")),
        # a record of an earlier podstate, without the mode and owner, keeps its copy
        (FileInfo("file", mode="644", owner="0:0", content="x\n"),
         line_entry("saved", PATH, "-", COPY), ("saved",)),
        (FileInfo("file", mode="644", owner="0:0", content="x\n"),
         line_entry("saved", PATH, "-", COPY, "600", "5:6"), ("saved", "600", "5:6")),
    ],
)  # fmt: skip
def test_the_entry_of_a_files_path_says_whose_file_was_there(found, was, fields):
    entry = _entry(PATH, "new\n", "644", found, was)
    assert entry.kind == fields[0]
    if entry.kind == "saved":
        assert entry.fields == (made.sums("new\n"), COPY, *fields[1:])
    elif entry.kind == "file":
        assert entry.fields == fields[1:]
    else:
        assert entry.fields == ()
    assert parse_record(made.render("pod-1", "i", [entry])).entries == {PATH: entry}


# --- end to end ---------------------------------------------------------------------------


def _apply(fleet) -> None:
    result = apply(fleet)
    assert result.returncode == 0, result.stdout + result.stderr


def _kinds(fleet) -> dict[str, str]:
    """Return each path the container disk's record names, with its entry's kind."""
    record = parse_record(fleet.out("pod-1", f"cat {MADE}"))
    return {path: entry.kind for path, entry in record.entries.items()}


def _state(fleet, path: str) -> tuple[str, str]:
    """Return what ``path`` holds on the pod, and its mode, owner and group."""
    return fleet.out("pod-1", f"cat -- {path}"), fleet.out("pod-1", STAT.format(path=path)).strip()


def _after(fleet, tmp_path: Path, how: str) -> None:
    """Check that nothing is left to do: the check is ok after an apply, and an uninstall
    finds nothing of podstate's left to remove."""
    if how == "apply":
        assert _report(fleet, tmp_path)["status"] == "ok"
    else:
        again = run(fleet, [str(BIN / "podstate"), "uninstall", "--dry-run"])
        assert again.returncode == 0, again.stdout + again.stderr


@pytest.fixture
def clean(fleet):
    """pod-1 with nothing of podstate's, before and after the test."""
    uninstall = [str(BIN / "podstate"), "uninstall"]
    yield fleet
    fleet.group_vars("all", BASE)
    done = run(fleet, uninstall)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("how", ["apply", "uninstall"])
def test_a_file_that_held_the_declared_content_is_the_users_and_stays(clean, tmp_path, how):
    fleet, path = clean, "/etc/found-by-podstate.conf"
    fleet.out("pod-1", f"printf 'mine\\n' > {path} && chown 1000:1000 {path}")
    fleet.group_vars("all", {**BASE, "files": {path: {"content": "mine\n"}}})
    _apply(fleet)
    assert _kinds(fleet)[path] == "found"
    assert _report(fleet, tmp_path)["status"] == "ok"

    fleet.group_vars("all", BASE)
    if how == "apply":
        changes = [c["operation"] for c in _report(fleet, tmp_path)["changes"]]
        assert not [c for c in changes if path in c], changes
        _apply(fleet)
        assert path not in _kinds(fleet)
    else:
        done = run(fleet, [str(BIN / "podstate"), "uninstall"])
        assert done.returncode == 0, done.stdout + done.stderr
        assert path not in done.stdout
    assert _state(fleet, path) == ("mine\n", "644 1000:1000")
    _after(fleet, tmp_path, how)


USERS = {
    # a secret, a script, and a file that held the declared content with another mode
    "/etc/user-secret.env": ("TOKEN=theirs\n", "600", "1000:1000"),
    "/usr/local/bin/user-tool": ("#!/bin/sh\necho theirs\n", "755", "1000:0"),
    "/etc/user-same.conf": ("podstate's\n", "640", "0:1000"),
}


@pytest.mark.parametrize("how", ["apply", "uninstall"])
def test_a_file_podstate_wrote_over_comes_back_with_its_mode_owner_and_group(clean, tmp_path, how):
    fleet = clean
    for path, (content, mode, owner) in USERS.items():
        fleet.out(
            "pod-1",
            f"cat > {path} && chmod {mode} {path} && chown {owner} {path}",
            content.encode(),
        )
    before = {path: _state(fleet, path) for path in USERS}
    fleet.group_vars(
        "all", {**BASE, "files": {path: {"content": "podstate's\n"} for path in USERS}}
    )
    _apply(fleet)
    for path in USERS:
        assert _state(fleet, path) == ("podstate's\n", "644 0:0")
        assert _kinds(fleet)[path] == "saved"

    fleet.group_vars("all", BASE)
    if how == "apply":
        changes = [c["operation"] for c in _report(fleet, tmp_path)["changes"]]
        for path in USERS:
            assert f"would put back: {path} as it was before podstate wrote it" in changes
        _apply(fleet)
    else:
        done = run(fleet, [str(BIN / "podstate"), "uninstall"])
        assert done.returncode == 0, done.stdout + done.stderr
    assert {path: _state(fleet, path) for path in USERS} == before
    assert fleet.out("pod-1", "/usr/local/bin/user-tool") == "theirs\n"
    _after(fleet, tmp_path, how)


@pytest.mark.parametrize("how", ["apply", "uninstall"])
def test_the_users_original_of_a_file_they_edited_since_is_named_until_moved(clean, tmp_path, how):
    fleet, path = clean, "/etc/user-edited.conf"
    fleet.out("pod-1", f"printf 'original\\n' > {path}")
    fleet.group_vars("all", {**BASE, "files": {path: {"content": "podstate's\n"}}})
    _apply(fleet)
    fleet.out("pod-1", f"printf 'edited\\n' > {path}")  # the user's edit, after podstate's
    kept = copy_of(path)

    fleet.group_vars("all", BASE)
    uninstall = [str(BIN / "podstate"), "uninstall"]
    for _ in range(2):  # named again by the next run: it stays in the record
        if how == "apply":
            entry = _report(fleet, tmp_path)
            [saved] = [v["message"] for v in entry["violations"] if v["id"] == "removal.saved"]
            result = apply(fleet)
            assert result.returncode == 1 and "removal.saved" in result.stderr
        else:
            result = run(fleet, uninstall)
            assert result.returncode == 1, result.stdout + result.stderr
            saved = result.stdout
        assert f"{path} is " in saved and f"kept at {kept}" in saved
        assert _state(fleet, path)[0] == "edited\n"  # the edit, left as it is
        assert fleet.out("pod-1", f"cat {kept}") == "original\n"

    fleet.out("pod-1", f"mv {kept} {path}.original")  # the user moves it where it belongs
    if how == "apply":
        _apply(fleet)
        assert path not in _kinds(fleet)
    else:
        result = run(fleet, uninstall)
        assert result.returncode == 0, result.stdout + result.stderr
    assert _state(fleet, path)[0] == "edited\n"
    _after(fleet, tmp_path, how)
