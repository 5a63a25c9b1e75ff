"""A tmpfs scratch is never mounted over a directory with something in it: the tmpfs would
hide what is there, and what is written there afterwards would vanish at the next restart.
The apply refuses with a violation naming an entry (a dot file too), leaves the directory as
it is, and mounts once it is empty; the boot hook does the same (pod-4 may mount)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from podstate.run.bookkeeping import mount_command
from tests import e2e
from tests.e2e import BIN, apply, check

SANDBOX = {"pods": 4}
SCRATCH = "/scratch-hides"
MOUNTED = f"mountpoint -q {SCRATCH} && echo mounted || echo not"


def _report(fleet, tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    out = tmp_path / "r.json"
    result = check(fleet, "--limit", "pod-4", "--json", str(out), env=env)
    assert out.exists(), result.stderr
    return json.loads(out.read_text())["pods"]["pod-4"]


def test_no_tmpfs_over_a_directory_with_files_in_it(fleet, tmp_path):
    fleet.out("pod-4", f"mkdir -p {SCRATCH} && echo mine > {SCRATCH}/.notes")
    fleet.group_vars("all", {"scratch": {SCRATCH: {"size": "16M"}}})

    entry = _report(fleet, tmp_path)
    assert entry["status"] == "violation", entry
    [found] = [v["message"] for v in entry["violations"] if v["id"] == f"scratch.{SCRATCH}"]
    assert f"scratch {SCRATCH} holds files (among them .notes)" in found
    assert "vanish at the next restart" in found

    run = apply(fleet, "--limit", "pod-4")
    assert run.returncode == 1 and f"scratch.{SCRATCH}" in run.stderr
    assert fleet.out("pod-4", MOUNTED) == "not\n"
    assert fleet.out("pod-4", f"cat {SCRATCH}/.notes") == "mine\n"

    fleet.out("pod-4", f"mv {SCRATCH}/.notes /root/notes")  # as the violation says
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    assert fleet.out("pod-4", MOUNTED) == "mounted\n"
    assert _report(fleet, tmp_path)["status"] == "ok"


def test_a_file_where_the_scratch_goes_is_a_violation_and_stays(fleet, tmp_path):
    """A regular file at the scratch path is no directory to mount over or create: the check
    and the apply name it and how to fix it, the file stays, and no hook data mounts there."""
    path = "/scratch-file"
    fleet.out("pod-4", f"echo mine > {path}")
    fleet.host_vars("pod-4", {"scratch": {path: {"size": "16M"}}, "boot": {"hook": True}})
    try:
        entry = _report(fleet, tmp_path)
        assert entry["status"] == "violation", entry
        [found] = [v["message"] for v in entry["violations"] if v["id"] == f"scratch.{path}"]
        assert f"scratch {path} is a regular file, not a directory" in found
        run = apply(fleet, "--limit", "pod-4")
        assert run.returncode == 1 and f"scratch {path} is a regular file" in run.stderr
        assert "Traceback" not in run.stderr
        assert fleet.out("pod-4", f"cat {path}") == "mine\n"
        state = fleet.out("pod-4", "cat /workspace/.podstate/boot/state 2>/dev/null || true")
        assert f" {path}\n" not in state  # the hook mounts nothing over it at a restart
    finally:
        fleet.host_vars("pod-4", None)
        fleet.out("pod-4", f"rm -f {path}")


def test_the_boot_hook_mounts_no_tmpfs_over_files_the_image_put_there(fleet):
    from podstate.sandbox import container

    fleet.host_vars("pod-4", {"scratch": {SCRATCH: {"size": "16M"}}, "boot": {"hook": True}})
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    assert fleet.out("pod-4", MOUNTED) == "mounted\n"
    # the image's own start puts a file where the scratch goes, before the hook runs
    start = f"mkdir -p {SCRATCH} && echo image > {SCRATCH}/baked; . /workspace/.podstate/boot.sh"
    container.set_start_command("pod-4", f"exec bash -c '{start}; exec /start.sh'")
    container.restart("pod-4")

    assert fleet.out("pod-4", MOUNTED) == "not\n"
    assert fleet.out("pod-4", f"cat {SCRATCH}/baked") == "image\n"
    status = fleet.out("pod-4", "cat /etc/podstate/boot")
    assert f"error scratch {SCRATCH}: holds files (among them baked)" in status


@pytest.mark.parametrize("shell", ["dash", "bash"])
@pytest.mark.parametrize(
    "mounted, held, mounts, fails",
    [(True, False, False, False), (True, True, False, False), (False, False, True, False),
     (False, True, False, True)],
)  # fmt: skip
def test_the_mount_command_looks_again(tmp_path, shell, mounted, held, mounts, fails):
    """The apply's own mount command mounts only where no tmpfs is yet and nothing is in
    the directory, whatever the probe saw: mountpoint and mount stand in, and say so."""
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "calls"
    for name, status in (("mountpoint", 0 if mounted else 1), ("mount", 0)):
        (tools / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexit {status}\n')
        (tools / name).chmod(0o755)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    if held:
        (scratch / ".notes").write_text("mine\n")
    env = {"PATH": f"{tools}:/usr/bin:/bin"}
    done = subprocess.run(
        [shell, "-c", mount_command(str(scratch), 1 << 20, "1777")],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    calls = log.read_text()
    assert ("mount -t tmpfs" in calls) == mounts, calls
    assert (done.returncode != 0) == fails, done.stderr
    assert ("is not empty: no tmpfs over it" in done.stderr) == fails


def test_the_boot_hook_looks_behind_a_scratch_path_that_is_a_symlink(fleet):
    """A scratch path may be a symlink (an image's /scratch -> /workspace/scratch): mount
    follows it, so the boot hook must look where it leads. Its find did not follow the
    link, saw nothing, and mounted a tmpfs over the files behind it, which the probe's glob
    and the apply's ls (both following it) refuse."""
    from podstate.sandbox import container

    link = "/scratch-link"
    fleet.group_vars("all", {})  # nothing for every pod, not even the shipped defaults
    fleet.host_vars("pod-4", {"scratch": {link: {"size": "16M"}}, "boot": {"hook": True}})
    # through the API, which vouches for the host key a restart before this test made
    run = apply(fleet, "--limit", "pod-4", env=fleet.api_env())
    assert run.returncode == 0, run.stderr
    start = (
        "mkdir -p /workspace/behind && echo image > /workspace/behind/baked &&"
        f" ln -s /workspace/behind {link}; . /workspace/.podstate/boot.sh"
    )
    container.set_start_command("pod-4", f"exec bash -c '{start}; exec /start.sh'")
    try:
        container.restart("pod-4")
        assert fleet.out("pod-4", f"mountpoint -q {link} && echo mounted || echo not") == "not\n"
        assert fleet.out("pod-4", f"cat {link}/baked") == "image\n"
        status = fleet.out("pod-4", "cat /etc/podstate/boot")
        assert f"error scratch {link}: holds files (among them baked)" in status
    finally:
        container.set_start_command("pod-4", None)
        fleet.out("pod-4", f"umount {link} 2>/dev/null; rm -rf /workspace/behind")


def test_a_scratch_below_another_is_mounted_after_it_whatever_the_order_given(fleet, tmp_path):
    """Declared inner first, the inner tmpfs was mounted first and the outer one then refused
    (its directory held the inner mount point): the apply failed, and every later one too.
    The outer one is mounted first, by the apply and by the boot hook at a restart, and
    removal takes the inner one down first."""
    from podstate.sandbox import container

    outer, inner = "/nest", "/nest/inner"
    shown = f"awk '$2 ~ \"^{outer}\" {{print $2, $3}}' /proc/self/mounts"
    declared = (
        f"scratch:\n  {inner}: {{size: 8M}}\n  {outer}: {{size: 16M}}\nboot: {{hook: true}}\n"
    )
    fleet.host_vars("pod-4", declared)  # as written: a dict would be dumped with keys sorted
    container.set_start_command(
        "pod-4", "exec bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'"
    )
    try:
        run = apply(fleet, "--limit", "pod-4", env=fleet.api_env())
        assert run.returncode == 0, run.stderr
        assert fleet.out("pod-4", shown) == f"{outer} tmpfs\n{inner} tmpfs\n"
        fleet.out("pod-4", f"echo kept > {inner}/work")  # seen through both mounts
        report = _report(fleet, tmp_path, fleet.api_env())
        assert report["status"] == "ok", report

        container.restart("pod-4")
        assert fleet.out("pod-4", shown) == f"{outer} tmpfs\n{inner} tmpfs\n"
        assert "error" not in fleet.out("pod-4", "cat /etc/podstate/boot")

        fleet.host_vars("pod-4", {"boot": {"hook": True}})
        run = apply(fleet, "--limit", "pod-4", env=fleet.api_env())
        assert run.returncode == 0, run.stderr
        assert fleet.out("pod-4", f"{shown}; ls -d {outer} 2>&1 || true").endswith(
            "No such file or directory\n"
        )
    finally:
        container.set_start_command("pod-4", None)
        fleet.host_vars("pod-4", None)
        fleet.out("pod-4", f"umount {inner} {outer} 2>/dev/null; rm -rf {outer}")


@pytest.mark.parametrize("gone", ["restart", "umount"])
def test_a_scratch_whose_tmpfs_went_leaves_the_pod_in_one_apply(fleet, tmp_path, gone):
    """A tmpfs gone already when its scratch leaves the state (a restart took it with the
    container disk; or it was unmounted, its mount point left, as a Vast stop and start
    leaves it): one apply forgets it, taking the empty mount point podstate made, and the
    check after it finds nothing to do. The record named the mount point for one more run,
    so the check after the apply saw drift."""
    from podstate.sandbox import container

    path = "/scratch-went"
    fleet.host_vars("pod-4", {"scratch": {path: {"size": "8M"}}})
    try:
        run = apply(fleet, "--limit", "pod-4", env=fleet.api_env())
        assert run.returncode == 0, run.stderr
        if gone == "restart":
            container.restart("pod-4")
        else:
            fleet.out("pod-4", f"umount {path}")
        fleet.host_vars("pod-4", {})
        run = apply(fleet, "--limit", "pod-4", env=fleet.api_env())
        assert run.returncode == 0, run.stderr
        assert fleet.out("pod-4", f"ls -d {path} 2>&1 || true").endswith(
            "No such file or directory\n"
        )
        assert f"={path}" not in fleet.out("pod-4", "cat /etc/podstate/made 2>/dev/null || :")
        report = _report(fleet, tmp_path, fleet.api_env())
        assert report["status"] == "ok", report
    finally:
        fleet.host_vars("pod-4", None)
        fleet.out("pod-4", f"umount {path} 2>/dev/null; rm -rf {path}")


def test_a_scratch_with_another_still_mounted_below_it_stays_named(fleet, tmp_path):
    """The outer scratch leaves the state, the inner one stays: the kernel would refuse to
    unmount the outer tmpfs (the apply failed on umount's "target is busy"); it stays
    mounted, a violation says why and what to do, and once the inner one goes too, both do."""
    outer, inner = "/nest-out", "/nest-out/inner"
    shown = f"awk '$2 ~ \"^{outer}\" {{print $2}}' /proc/self/mounts"
    fleet.host_vars("pod-4", {"scratch": {outer: {"size": "16M"}, inner: {"size": "8M"}}})
    try:
        assert apply(fleet, "--limit", "pod-4", env=fleet.api_env()).returncode == 0
        fleet.host_vars("pod-4", {"scratch": {inner: {"size": "8M"}}})
        report = _report(fleet, tmp_path, fleet.api_env())
        [found] = [v["message"] for v in report["violations"] if v["id"] == "removal.scratch"]
        assert f"scratch {outer} is no longer declared, but the mount at {inner} stays" in found
        run = apply(fleet, "--limit", "pod-4", env=fleet.api_env())
        assert run.returncode == 1 and "removal.scratch" in run.stderr, run.stderr
        assert "busy" not in run.stderr
        assert fleet.out("pod-4", shown) == f"{outer}\n{inner}\n"

        # an uninstall that leaves the inner one (it holds a file) leaves the outer one too
        fleet.out("pod-4", f"echo mine > {inner}/notes")
        uninstall = [str(BIN / "podstate"), "uninstall", "--limit", "pod-4"]
        done = e2e.run(fleet, uninstall, env=fleet.api_env())
        assert done.returncode != 0 and "busy" not in done.stderr, done.stderr
        assert f"the mount at {inner} stays in it" in done.stdout + done.stderr
        assert fleet.out("pod-4", shown) == f"{outer}\n{inner}\n"

        fleet.out("pod-4", f"rm {inner}/notes")
        fleet.host_vars("pod-4", {})
        assert apply(fleet, "--limit", "pod-4", env=fleet.api_env()).returncode == 0
        assert fleet.out("pod-4", shown) == ""
        assert _report(fleet, tmp_path, fleet.api_env())["status"] == "ok"
    finally:
        fleet.host_vars("pod-4", None)
        fleet.out("pod-4", f"umount {inner} {outer} 2>/dev/null; rm -rf {outer}")


def test_an_outer_scratch_around_a_mounted_one_names_the_mount_and_how_to_go_on(fleet, tmp_path):
    """A scratch declared around one already mounted: a tmpfs over it would hide that mount,
    so it is refused, and the violation names the mount (not "files (among them in)") and
    what to do; done, one apply mounts both, the outer first."""
    outer, inner = "/wrap", "/wrap/in"
    shown = f"awk '$2 ~ \"^{outer}\" {{print $2}}' /proc/self/mounts"
    fleet.host_vars("pod-4", {"scratch": {inner: {"size": "4M"}}})
    try:
        assert apply(fleet, "--limit", "pod-4", env=fleet.api_env()).returncode == 0
        fleet.host_vars("pod-4", {"scratch": {outer: {"size": "16M"}, inner: {"size": "4M"}}})
        report = _report(fleet, tmp_path, fleet.api_env())
        [found] = [v["message"] for v in report["violations"] if v["id"] == f"scratch.{outer}"]
        assert f"scratch {outer} holds the mount {inner}: a tmpfs mounted over it" in found
        assert "unmount it and remove its mount point" in found

        fleet.out("pod-4", f"umount {inner} && rmdir {inner}")  # as it says
        assert apply(fleet, "--limit", "pod-4", env=fleet.api_env()).returncode == 0
        assert fleet.out("pod-4", shown) == f"{outer}\n{inner}\n"
        assert _report(fleet, tmp_path, fleet.api_env())["status"] == "ok"
    finally:
        fleet.host_vars("pod-4", None)
        fleet.out("pod-4", f"umount {inner} {outer} 2>/dev/null; rm -rf {outer}")


def test_the_boot_hook_mounts_nested_scratch_through_a_link_in_the_applys_order(fleet):
    """The outer scratch written through a symlinked parent, the inner one through the
    directory, inner first: the boot hook mounts them in the order the apply did, where the
    paths lead (it followed the spelling and mounted the inner one first, then refused the
    outer one, which held its mount point)."""
    from podstate.sandbox import container

    real, link = "/hk-real", "/hk-link"
    outer, inner = f"{link}/o", f"{real}/o/in"
    shown = f"awk '$2 ~ \"^{real}\" {{print $2, $3}}' /proc/self/mounts"
    make_link = f"mkdir -p {real} && ln -sfn {real} {link}"
    fleet.out("pod-4", make_link)
    fleet.host_vars(
        "pod-4",
        f"scratch:\n  {inner}: {{size: 4M}}\n  {outer}: {{size: 16M}}\nboot: {{hook: true}}\n",
    )
    container.set_start_command(
        "pod-4", f"exec bash -c '{make_link}; . /workspace/.podstate/boot.sh; exec /start.sh'"
    )
    try:
        run = apply(fleet, "--limit", "pod-4", env=fleet.api_env())
        assert run.returncode == 0, run.stderr
        assert fleet.out("pod-4", shown) == f"{real}/o tmpfs\n{inner} tmpfs\n"
        container.restart("pod-4")
        assert fleet.out("pod-4", shown) == f"{real}/o tmpfs\n{inner} tmpfs\n"
        assert "error" not in fleet.out("pod-4", "cat /etc/podstate/boot")
    finally:
        container.set_start_command("pod-4", None)
        fleet.host_vars("pod-4", None)
        fleet.out("pod-4", f"umount {inner} {real}/o 2>/dev/null; rm -rf {real} {link}")
