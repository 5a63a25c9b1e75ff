"""A scratch tmpfs that leaves the desired state is unmounted, unless a process uses it: then
a violation names the processes, and the mount stays until they stop (pod-4 may mount). An
apt package podstate installed is left in place and named once when it leaves the list,
unless ``packages.remove_undeclared`` says to remove it; one that was there before, never
(pod-2, whose only apt source is a local repository). A repository podstate cloned goes,
unless someone's work is in it (work `git status --porcelain` does not show too: ignored
files, untracked ones hidden by status.showUntrackedFiles, a linked worktree, a branch no
remote holds), and the directories made above it to clone it go after it when nothing else
is in them (pod-2). The venv and its snapshots go; ``podstate uninstall
--keep-venv`` leaves them (pod-4)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from podstate.operations.removal import checkout_command, unmount_command
from tests.apt_repo import build_deb, serve
from tests.e2e import BIN, apply, check, run
from tests.fixtures.venv.wheels import tar_bytes, wheelhouse
from tests.test_repos import MAKE_ORIGIN

SANDBOX = {"pods": 4}
SCRATCH = "/scratch-rm"
BASE = {"shm": {"min_size": "32M"}}
MOUNTED = f"mountpoint -q {SCRATCH} && echo mounted || echo not"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@b"


def _entry(fleet, tmp_path: Path, pod: str = "pod-4") -> dict:
    out = tmp_path / "r.json"
    result = check(fleet, "--limit", pod, "--json", str(out))
    assert out.exists(), result.stderr
    return json.loads(out.read_text())["pods"][pod]


def test_a_busy_tmpfs_stays_mounted_and_names_its_processes_then_goes(fleet, tmp_path):
    fleet.group_vars(
        "all",
        {**BASE, "scratch": {SCRATCH: {"size": "64M"}}, "dirs": {"TMPDIR": f"{SCRATCH}/tmp"}},
    )
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    assert fleet.out("pod-4", MOUNTED) == "mounted\n"
    pid = fleet.out(
        "pod-4",
        f"touch {SCRATCH}/tmp/held; setsid sleep 600 <{SCRATCH}/tmp/held >/dev/null 2>&1 & echo $!",
    ).strip()
    try:
        fleet.group_vars("all", BASE)
        entry = _entry(fleet, tmp_path)
        assert entry["status"] == "violation"
        [busy] = [v for v in entry["violations"] if v["id"] == "removal.busy"]
        assert f"sleep (pid {pid})" in busy["message"] and SCRATCH in busy["message"]
        run = apply(fleet, "--limit", "pod-4")
        assert run.returncode == 1 and "removal.busy" in run.stderr
        assert fleet.out("pod-4", MOUNTED) == "mounted\n"
    finally:
        fleet.out("pod-4", f"kill {pid}; while kill -0 {pid} 2>/dev/null; do sleep 0.1; done")
    fleet.out("pod-4", f"rm {SCRATCH}/tmp/held")  # a tmpfs that holds a file stays: below
    changes = [c["operation"] for c in _entry(fleet, tmp_path)["changes"]]
    assert f"would remove: the tmpfs at {SCRATCH} and its mount point" in changes
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    assert fleet.out("pod-4", MOUNTED) == "not\n"
    assert fleet.ssh("pod-4", f"test -e {SCRATCH}").returncode == 1
    assert _entry(fleet, tmp_path)["status"] == "ok"


def uninstall(fleet, pod: str, *options: str):
    """Return ``podstate uninstall`` of ``pod`` with ``options``, as a user runs it."""
    return run(fleet, [str(BIN / "podstate"), "uninstall", "--limit", pod, *options])


def _scratch_with_a_checkpoint(fleet) -> str:
    """Apply a tmpfs scratch (TMPDIR in it) to pod-4, write a file into it, and take scratch
    out of the desired state; return the file's path."""
    fleet.group_vars(
        "all",
        {**BASE, "scratch": {SCRATCH: {"size": "64M"}}, "dirs": {"TMPDIR": f"{SCRATCH}/tmp"}},
    )
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    assert fleet.out("pod-4", MOUNTED) == "mounted\n"
    checkpoint = f"{SCRATCH}/tmp/run-7/step-1000.pt"
    fleet.out("pod-4", f"mkdir -p {SCRATCH}/tmp/run-7 && echo weights > {checkpoint}")
    fleet.group_vars("all", BASE)
    return checkpoint


def _held(entry: dict) -> str:
    """Return the message of the violation that keeps a tmpfs with files in it mounted."""
    assert entry["status"] == "violation", entry
    [held] = [v["message"] for v in entry["violations"] if v["id"] == "removal.scratch"]
    return held


def test_a_tmpfs_with_files_in_it_stays_mounted_and_named_until_it_is_emptied(fleet, tmp_path):
    checkpoint = _scratch_with_a_checkpoint(fleet)
    held = _held(_entry(fleet, tmp_path))
    assert (
        f"scratch {SCRATCH} is no longer declared, but holds files (among them {checkpoint})"
        in held
    )
    assert f"find {SCRATCH} -mindepth 1 -delete" in held
    run = apply(fleet, "--limit", "pod-4")
    assert run.returncode == 1 and "removal.scratch" in run.stderr
    assert fleet.out("pod-4", f"cat {checkpoint}") == "weights\n"
    assert SCRATCH in fleet.out("pod-4", "cat /etc/podstate/made")  # the record keeps it

    fleet.out("pod-4", f"find {SCRATCH} -mindepth 1 -delete")  # as the violation says
    changes = [c["operation"] for c in _entry(fleet, tmp_path)["changes"]]
    assert f"would remove: the tmpfs at {SCRATCH} and its mount point" in changes
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    assert fleet.out("pod-4", MOUNTED) == "not\n"
    assert _entry(fleet, tmp_path)["status"] == "ok"


def test_uninstall_leaves_a_tmpfs_with_files_in_it_unless_asked_to_discard_them(fleet):
    checkpoint = _scratch_with_a_checkpoint(fleet)
    kept = uninstall(fleet, "pod-4")
    assert kept.returncode == 1, kept.stdout + kept.stderr
    assert f"scratch {SCRATCH} is to go, but holds files (among them {checkpoint})" in kept.stdout
    assert "`podstate uninstall --discard-scratch` discards the rest" in kept.stdout
    assert fleet.out("pod-4", f"cat {checkpoint}") == "weights\n"

    dry = uninstall(fleet, "pod-4", "--dry-run", "--discard-scratch")
    assert dry.returncode == 2, dry.stdout + dry.stderr
    assert f"would remove: the tmpfs at {SCRATCH}, and the files in it" in dry.stdout
    gone = uninstall(fleet, "pod-4", "--discard-scratch")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert fleet.out("pod-4", MOUNTED) == "not\n"
    assert fleet.ssh("pod-4", f"test -e {SCRATCH}").returncode == 1


def test_the_unmount_looks_again_and_leaves_a_tmpfs_written_to_since_the_plan(fleet):
    path = "/scratch-again"
    fleet.out("pod-4", f"mkdir -p {path} && mount -t tmpfs -o size=1M podstate {path}")
    fleet.out("pod-4", f"mkdir -p {path}/.podstate-cache/uv {path}/tmp && echo x > {path}/tmp/new")
    result = fleet.ssh("pod-4", unmount_command(path, remove=True, discard=False))
    assert result.returncode == 1
    assert f"{path}: not empty now ({path}/tmp/new): left mounted" in result.stderr
    assert fleet.out("pod-4", f"cat {path}/tmp/new") == "x\n"
    fleet.out("pod-4", f"rm {path}/tmp/new")  # podstate's caches and empty directories: no file
    result = fleet.ssh("pod-4", unmount_command(path, remove=True, discard=False))
    assert result.returncode == 0, result.stderr
    assert fleet.ssh("pod-4", f"test -e {path}").returncode == 1

    fleet.out("pod-4", f"mkdir -p {path} && mount -t tmpfs -o size=1M podstate {path}")
    fleet.out("pod-4", f"echo x > {path}/new")
    result = fleet.ssh("pod-4", unmount_command(path, remove=True, discard=True))
    assert result.returncode == 0, result.stderr
    assert fleet.ssh("pod-4", f"test -e {path}").returncode == 1


def _installed(fleet, package: str) -> bool:
    status = fleet.out("pod-2", f"dpkg-query -W -f '${{db:Status-Abbrev}}' {package} || :")
    return status.startswith("ii")


def test_an_apt_package_podstate_installed_is_left_named_once_or_removed_when_asked(
    fleet, tmp_path
):
    mine, theirs, asked = "podstate-rm-mine", "podstate-rm-theirs", "podstate-rm-asked"
    serve(fleet, "pod-2", [build_deb(tmp_path, name) for name in (mine, theirs, asked)])
    fleet.out("pod-2", f"apt-get update -qq && apt-get install -y -qq {theirs} >/dev/null")
    fleet.group_vars("all", {**BASE, "packages": {"apt": [mine, theirs]}})
    assert apply(fleet, "--limit", "pod-2").returncode == 0
    assert _installed(fleet, mine) and _installed(fleet, theirs)

    fleet.group_vars("all", {**BASE, "packages": {"apt": []}})
    changes = [c["operation"] for c in _entry(fleet, tmp_path, "pod-2")["changes"]]
    named = [c for c in changes if mine in c]
    assert len(named) == 1 and "left in place" in named[0] and "remove_undeclared" in named[0]
    assert not [c for c in changes if theirs in c]  # there before podstate: not its own
    assert apply(fleet, "--limit", "pod-2").returncode == 0
    assert _installed(fleet, mine) and _installed(fleet, theirs)
    assert _entry(fleet, tmp_path, "pod-2")["status"] == "ok"  # named once

    fleet.group_vars("all", {**BASE, "packages": {"apt": [asked]}})
    assert apply(fleet, "--limit", "pod-2").returncode == 0
    fleet.group_vars("all", {**BASE, "packages": {"apt": [], "remove_undeclared": True}})
    changes = [c["operation"] for c in _entry(fleet, tmp_path, "pod-2")["changes"]]
    assert f"would remove: the apt package {asked}" in changes
    assert apply(fleet, "--limit", "pod-2").returncode == 0
    assert not _installed(fleet, asked)
    assert _installed(fleet, mine) and _installed(fleet, theirs)
    assert _entry(fleet, tmp_path, "pod-2")["status"] == "ok"


def test_a_checkout_podstate_cloned_goes_unless_someones_work_is_in_it(fleet, tmp_path):
    fleet.out("pod-2", MAKE_ORIGIN.format(bare="/srv/git/rm.git"))
    clean, worked = "/root/rm-code/clean", "/root/rm-code/worked"
    url = "file:///srv/git/rm.git"
    fleet.group_vars(
        "all",
        {
            **BASE,
            "repos": {clean: {"url": url, "ref": "v1.0"}, worked: {"url": url, "ref": "main"}},
        },
    )
    run = apply(fleet, "--limit", "pod-2")
    assert run.returncode == 0, run.stderr
    fleet.out("pod-2", f"echo mine > {worked}/notes.txt")

    fleet.group_vars("all", BASE)
    changes = [c["operation"] for c in _entry(fleet, tmp_path, "pod-2")["changes"]]
    assert f"would remove: the checkout {clean}" in changes
    assert [c for c in changes if c.startswith("would forget:") and worked in c]
    run = apply(fleet, "--limit", "pod-2")
    assert run.returncode == 0, run.stderr
    assert fleet.ssh("pod-2", f"test -e {clean}").returncode == 1
    assert fleet.out("pod-2", f"cat {worked}/notes.txt") == "mine\n"
    assert _entry(fleet, tmp_path, "pod-2")["status"] == "ok"


# Work git would not give back from the remote, though `git status --porcelain` shows none:
# each checkout's kind of work, the sh that makes it, and the words that name it.
HIDDEN_WORK = {
    "ignored": (
        "echo checkpoints/ >> .git/info/exclude && mkdir checkpoints &&"
        " echo weights > checkpoints/step-1000.pt",
        "ignored files",
    ),
    "unshown": (
        "git config status.showUntrackedFiles no && echo mine > notes.txt",
        "untracked files",
    ),
    "worktree": ("git worktree add -q --detach /root/rm-hidden-tree", "a linked worktree"),
    "branch": ("git branch experiment", "a branch no remote holds"),
}


def test_a_checkout_with_work_git_status_does_not_show_is_kept_and_named(fleet, tmp_path):
    fleet.out("pod-2", MAKE_ORIGIN.format(bare="/srv/git/hidden.git"))
    url = "file:///srv/git/hidden.git"
    paths = {kind: f"/root/rm-hidden/{kind}" for kind in HIDDEN_WORK}
    fleet.group_vars(
        "all", {**BASE, "repos": {p: {"url": url, "ref": "main"} for p in paths.values()}}
    )
    run = apply(fleet, "--limit", "pod-2")
    assert run.returncode == 0, run.stderr
    for kind, (make, _) in HIDDEN_WORK.items():
        fleet.out("pod-2", f"cd {paths[kind]} && {make}")
        assert fleet.out("pod-2", f"git -C {paths[kind]} status --porcelain") == ""

    fleet.group_vars("all", BASE)
    changes = [c["operation"] for c in _entry(fleet, tmp_path, "pod-2")["changes"]]
    for kind, (_, words) in HIDDEN_WORK.items():
        named = f"would forget: {paths[kind]} has work of someone's own in it ({words})"
        assert named in "\n".join(changes), "\n".join(changes)
        assert f"would remove: the checkout {paths[kind]}" not in changes
    run = apply(fleet, "--limit", "pod-2")
    assert run.returncode == 0, run.stderr
    assert fleet.out("pod-2", f"cat {paths['ignored']}/checkpoints/step-1000.pt") == "weights\n"
    assert fleet.out("pod-2", f"cat {paths['unshown']}/notes.txt") == "mine\n"
    assert fleet.out("pod-2", f"git -C {paths['branch']} branch --list experiment").strip()
    tree = "git -C /root/rm-hidden-tree rev-parse --is-inside-work-tree"
    assert fleet.out("pod-2", tree) == "true\n"
    assert _entry(fleet, tmp_path, "pod-2")["status"] == "ok"


def test_the_checkouts_removal_looks_again_and_keeps_work_done_since_the_plan(fleet):
    fleet.out("pod-2", MAKE_ORIGIN.format(bare="/srv/git/again.git"))
    checkout = "/root/rm-again/code"
    fleet.out("pod-2", f"git clone -q file:///srv/git/again.git {checkout}")
    fleet.out(
        "pod-2",
        f"cd {checkout} && echo out/ >> .git/info/exclude && mkdir out && echo x > out/run.log",
    )
    result = fleet.ssh("pod-2", checkout_command(checkout, keep_directory=False))
    assert result.returncode == 1
    assert (
        f"{checkout}: it holds work of its own now (ignored files): left as it is" in result.stderr
    )
    assert fleet.out("pod-2", f"cat {checkout}/out/run.log") == "x\n"
    fleet.out("pod-2", f"rm -r {checkout}/out")
    result = fleet.ssh("pod-2", checkout_command(checkout, keep_directory=False))
    assert result.returncode == 0, result.stderr
    assert fleet.ssh("pod-2", f"test -e {checkout}").returncode == 1


@pytest.mark.parametrize("mine", [False, True], ids=["empty", "a-file-of-the-users"])
def test_the_directories_made_above_a_checkout_go_after_it_unless_someone_uses_them(
    fleet, tmp_path, mine
):
    fleet.out("pod-2", MAKE_ORIGIN.format(bare="/srv/git/deep.git"))
    top = f"/root/rm-deep-{'mine' if mine else 'empty'}"
    middle, checkout = f"{top}/team", f"{top}/team/proj"
    fleet.group_vars(
        "all", {**BASE, "repos": {checkout: {"url": "file:///srv/git/deep.git", "ref": "v1.0"}}}
    )
    for _ in range(2):  # the second run finds the directories there: still podstate's
        assert apply(fleet, "--limit", "pod-2").returncode == 0
        record = fleet.out("pod-2", "cat /etc/podstate/made").splitlines()
        assert {f"dir ={top}", f"dir ={middle}"} <= set(record)
    if mine:
        fleet.out("pod-2", f"echo mine > {middle}/notes.txt")

    fleet.group_vars("all", BASE)
    changes = [c["operation"] for c in _entry(fleet, tmp_path, "pod-2")["changes"]]
    assert f"would remove: the checkout {checkout}" in changes
    for directory in (middle, top):
        assert f"would remove: {directory}, when nothing else is in it" in changes
    assert apply(fleet, "--limit", "pod-2").returncode == 0
    assert fleet.ssh("pod-2", f"test -e {checkout}").returncode == 1
    if mine:
        assert fleet.out("pod-2", f"cat {middle}/notes.txt") == "mine\n"
    else:
        assert fleet.ssh("pod-2", f"test -e {top}").returncode == 1
    assert _entry(fleet, tmp_path, "pod-2")["status"] == "ok"


def test_a_keys_block_without_its_end_mark_removes_nothing_and_says_why(fleet, tmp_path):
    keys, mine = "/root/.ssh/authorized_keys", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine mine@pc"
    fleet.group_vars("all", {**BASE, "authorized_keys": [KEY]})
    assert apply(fleet, "--limit", "pod-3").returncode == 0
    # the end mark lost in a hand edit, the user's own key added after podstate's
    fleet.out(
        "pod-3", f"sed -i '/^# <<< podstate authorized_keys/d' {keys} && echo '{mine}' >> {keys}"
    )
    edited = fleet.out("pod-3", f"cat {keys}")

    fleet.group_vars("all", BASE)
    entry = _entry(fleet, tmp_path, "pod-3")
    assert entry["status"] == "violation"
    [why] = [v["message"] for v in entry["violations"] if v["id"] == "removal.block"]
    assert "~/.ssh/authorized_keys has lost its end mark" in why and "removes nothing" in why
    run = apply(fleet, "--limit", "pod-3")
    assert run.returncode == 1 and "removal.block" in run.stderr
    assert fleet.out("pod-3", f"cat {keys}") == edited
    gone = uninstall(fleet, "pod-3")
    assert gone.returncode == 1 and "lost its end mark" in gone.stdout, gone.stdout + gone.stderr
    assert fleet.out("pod-3", f"cat {keys}") == edited

    # the end mark put back after podstate's key: the block goes, the user's key stays
    fleet.out("pod-3", f"sed -i 's/^{KEY}$/&\\n# <<< podstate authorized_keys <<</' {keys}")
    assert apply(fleet, "--limit", "pod-3").returncode == 0
    after = fleet.out("pod-3", f"cat {keys}")
    assert KEY not in after and "podstate" not in after and after.endswith(mine + "\n")
    assert _entry(fleet, tmp_path, "pod-3")["status"] == "ok"


def test_the_venv_and_its_snapshots_go_or_stay_with_keep_venv(fleet, tmp_path):
    house = base64.b64encode(tar_bytes(wheelhouse(tmp_path / "wheels"))).decode()
    fleet.out("pod-4", f"mkdir -p /workspace/wheels && echo {house} | base64 -d | "
                       "tar -xzf - -C /workspace/wheels")  # fmt: skip
    snapshot = "/workspace/rm-snapshots"
    venv = {"path": "/opt/rm-venv", "packages": ["tinyapp"], "find_links": ["/workspace/wheels"],
            "no_index": True, "snapshot": snapshot}  # fmt: skip
    fleet.group_vars("all", {**BASE, "venv": venv})
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    built = fleet.out("pod-4", "ls -A /opt")
    assert "rm-venv" in built and fleet.out("pod-4", f"ls {snapshot}").strip()

    kept = run(fleet, [str(BIN / "podstate"), "uninstall", "--limit", "pod-4", "--keep-venv"])
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "would leave in place" not in kept.stdout  # the result: nothing of podstate's left
    assert fleet.out("pod-4", "ls -A /opt") == built  # the venv and its snapshots stayed
    assert fleet.out("pod-4", f"ls {snapshot}").strip()

    fleet.group_vars("all", {**BASE, "venv": venv})
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    fleet.group_vars("all", BASE)
    changes = [c["operation"] for c in _entry(fleet, tmp_path)["changes"]]
    assert "would remove: /opt/rm-venv" not in changes
    assert "would remove: the venv /opt/rm-venv" in changes
    assert f"would remove: the venv snapshots in {snapshot}" in changes
    assert apply(fleet, "--limit", "pod-4").returncode == 0
    assert "rm-venv" not in fleet.out("pod-4", "ls -A /opt")
    assert fleet.ssh("pod-4", f"test -e {snapshot}").returncode == 1
    assert _entry(fleet, tmp_path)["status"] == "ok"
