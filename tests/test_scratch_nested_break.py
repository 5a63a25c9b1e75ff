"""Nested scratch paths, and tmpfs that went on their own: mounted parents first whatever
the spelling and order given; removal and uninstall never hide, follow or take away what
podstate did not make or what holds files; one apply leaves the pod as the check after it
finds it (``ok``), or names why not. pod-4 may mount; pod-1 may not (a scratch is a
directory there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate.desired.errors import Layer
from podstate.desired.spec import resolve
from tests import e2e
from tests.e2e import BIN, apply, check

SANDBOX = {"pods": 4}


# --- no pod -------------------------------------------------------------------------------


def _spellings(path: str) -> st.SearchStrategy[str]:
    """Return ways a vars file may write ``path``: as it is, with a trailing slash, a ``.``
    part, a doubled slash, or a detour through ``..``."""
    head, _, last = path.rpartition("/")
    return st.sampled_from(
        [path, path + "/", f"{head}/./{last}", f"{head}//{last}", f"{head}/zz/../{last}"]
    )


@given(
    st.lists(st.lists(st.sampled_from("ab"), min_size=1, max_size=3), min_size=1, max_size=6)
    .map(lambda parts: list(dict.fromkeys("/n/" + "/".join(p) for p in parts)))
    .flatmap(lambda paths: st.tuples(*[_spellings(p) for p in paths]).map(list))
    .flatmap(st.permutations)
)
@settings(max_examples=200, deadline=None)
def test_every_spelling_of_nested_scratch_comes_once_and_parents_first(written: list[str]):
    """However a nested scratch path is spelt (a trailing slash, ``.``, ``//``, ``..``) and
    in whatever order, the state names each path once, normalized, after every path it lies
    under."""
    scratch = {p: {"size": "1M"} for p in written}
    state = resolve([Layer("t.yaml", {"scratch": scratch})], "p")
    paths = list(state["scratch"])
    normal = {"/" + "/".join(q for q in p.split("/") if q not in ("", ".")) for p in written}
    normal = {p.replace("/zz/..", "") for p in normal}
    assert sorted(paths) == sorted(normal)
    for i, path in enumerate(paths):
        assert not any(path.startswith(f"{p}/") for p in paths[i:]), paths


# --- end to end: helpers ------------------------------------------------------------------


def _report(fleet, tmp_path: Path, pod: str = "pod-4") -> dict:
    out = tmp_path / "r.json"
    result = check(fleet, "--limit", pod, "--json", str(out), env=fleet.api_env())
    assert out.exists(), result.stderr
    return json.loads(out.read_text())["pods"][pod]


def _apply(fleet, pod: str = "pod-4") -> e2e.Run:
    run = apply(fleet, "--limit", pod, env=fleet.api_env())
    assert "Traceback" not in run.stderr, run.stderr
    return run


def _mounts(fleet, top: str, pod: str = "pod-4") -> str:
    """Return the mounts at and below ``top``, one "TARGET FSTYPE" a line, in mount order."""
    shown = f'awk \'$2 == "{top}" || $2 ~ "^{top}/" {{print $2, $3}}\' /proc/mounts'
    return fleet.out(pod, shown)


def _messages(entry: dict, violation: str) -> list[str]:
    return [v["message"] for v in entry["violations"] if v["id"] == violation]


def _start(fleet, where: str) -> str:
    """Start a process whose working directory is ``where`` on pod-4; return its pid once
    the kernel says it is there."""
    started = f"setsid sh -c 'cd {where} && exec sleep 3600' </dev/null >/dev/null 2>&1 & echo $!"
    pid = fleet.out("pod-4", started).strip()
    ready = f'[ "$(readlink /proc/{pid}/cwd)" = {where} ] && grep -qx sleep /proc/{pid}/comm'
    fleet.out("pod-4", f"timeout 60 sh -c 'until {ready}; do sleep 0.05; done'")
    return pid


def _stop(fleet, pid: str) -> None:
    fleet.out("pod-4", f"kill {pid} 2>/dev/null; tail --pid={pid} -f /dev/null")


def _apply_takes_all(fleet, tmp_path: Path, top: str) -> None:
    """Apply on pod-4, which succeeds and leaves nothing mounted at or below ``top``, nor
    ``top`` itself; the check after it finds nothing to do."""
    run = _apply(fleet)
    assert run.returncode == 0, run.stderr
    assert _mounts(fleet, top) == ""
    assert fleet.ssh("pod-4", f"test -e {top}").returncode == 1
    assert _report(fleet, tmp_path)["status"] == "ok"


def _clean(fleet, top: str, pod: str = "pod-4") -> None:
    fleet.host_vars(pod, None)
    fleet.out(pod, f"umount -R {top} 2>/dev/null; rm -rf {top}; :")


# --- end to end: nesting ------------------------------------------------------------------


def test_three_levels_scrambled_and_spelt_oddly_mount_in_order_and_leave_in_one_apply(
    fleet, tmp_path
):
    """Three levels, declared innermost first and spelt with a trailing slash and ``..``:
    one apply mounts them outermost first, the check after it is ``ok``; the middle one
    leaving alone stays mounted, named, with the file below it kept; all three leaving go
    in one apply, mount points too."""
    top, mid, low = "/n3", "/n3/mid", "/n3/mid/low"
    declared = (
        "scratch:\n"
        f"  {low}/: {{size: 4M}}\n"
        f"  {top}/x/../mid: {{size: 8M}}\n"
        f"  {top}/: {{size: 16M}}\n"
    )
    fleet.host_vars("pod-4", declared)
    try:
        run = _apply(fleet)
        assert run.returncode == 0, run.stderr
        assert _mounts(fleet, top) == f"{top} tmpfs\n{mid} tmpfs\n{low} tmpfs\n"
        assert _report(fleet, tmp_path)["status"] == "ok"
        fleet.out("pod-4", f"echo kept > {low}/work")

        fleet.host_vars("pod-4", f"scratch:\n  {low}: {{size: 4M}}\n  {top}: {{size: 16M}}\n")
        entry = _report(fleet, tmp_path)
        [found] = _messages(entry, "removal.scratch")
        assert f"scratch {mid} is no longer declared, but the mount at {low} stays" in found
        run = _apply(fleet)
        assert run.returncode == 1 and "removal.scratch" in run.stderr, run.stderr
        assert "busy" not in run.stderr
        assert _mounts(fleet, top) == f"{top} tmpfs\n{mid} tmpfs\n{low} tmpfs\n"
        assert fleet.out("pod-4", f"cat {low}/work") == "kept\n"

        fleet.out("pod-4", f"rm {low}/work")
        fleet.host_vars("pod-4", {})
        _apply_takes_all(fleet, tmp_path, top)
    finally:
        _clean(fleet, top)


def test_a_busy_inner_tmpfs_keeps_the_outer_one_mounted_both_named(fleet, tmp_path):
    """Both leave, a process works in the inner one: the inner stays (``removal.busy``), the
    outer one stays too (``removal.scratch``), no umount is tried; once the process ends,
    one apply takes both."""
    outer, inner = "/nb", "/nb/in"
    fleet.host_vars("pod-4", {"scratch": {outer: {"size": "16M"}, inner: {"size": "8M"}}})
    pid = None
    try:
        assert _apply(fleet).returncode == 0
        pid = _start(fleet, inner)
        fleet.host_vars("pod-4", {})
        entry = _report(fleet, tmp_path)
        [busy] = _messages(entry, "removal.busy")
        assert inner in busy and f"sleep (pid {pid})" in busy
        [stays] = _messages(entry, "removal.scratch")
        assert f"scratch {outer} is no longer declared, but the mount at {inner} stays" in stays
        run = _apply(fleet)
        assert run.returncode == 1, run.stderr
        assert "removal.busy" in run.stderr and "removal.scratch" in run.stderr
        assert "target is busy" not in run.stderr
        assert _mounts(fleet, outer) == f"{outer} tmpfs\n{inner} tmpfs\n"

        _stop(fleet, pid)
        pid = None
        _apply_takes_all(fleet, tmp_path, outer)
    finally:
        if pid is not None:
            _stop(fleet, pid)
        _clean(fleet, outer)


def test_an_inner_tmpfs_gone_by_hand_goes_with_the_outer_one_in_one_apply(fleet, tmp_path):
    """The inner tmpfs was unmounted by hand, its empty mount point left in the outer one:
    both leaving the state go in one apply (the mount point, then the outer tmpfs)."""
    outer, inner = "/ng", "/ng/in"
    fleet.host_vars("pod-4", {"scratch": {outer: {"size": "16M"}, inner: {"size": "8M"}}})
    try:
        assert _apply(fleet).returncode == 0
        fleet.out("pod-4", f"umount {inner}")
        fleet.host_vars("pod-4", {})
        _apply_takes_all(fleet, tmp_path, outer)
    finally:
        _clean(fleet, outer)


def test_a_file_left_where_an_inner_tmpfs_was_keeps_both_and_names_it(fleet, tmp_path):
    """The inner tmpfs went, and a file was written where it was (on the outer tmpfs): the
    file is kept, the outer tmpfs holding it stays mounted and is named, never unmounted
    with the file in it."""
    outer, inner = "/nf", "/nf/in"
    fleet.host_vars("pod-4", {"scratch": {outer: {"size": "16M"}, inner: {"size": "8M"}}})
    try:
        assert _apply(fleet).returncode == 0
        fleet.out("pod-4", f"umount {inner} && echo mine > {inner}/notes")
        fleet.host_vars("pod-4", {})
        run = _apply(fleet)
        assert run.returncode == 1 and "removal.scratch" in run.stderr, run.stderr
        assert fleet.out("pod-4", f"cat {inner}/notes") == "mine\n"
        assert _mounts(fleet, outer) == f"{outer} tmpfs\n"
        [found] = _messages(_report(fleet, tmp_path), "removal.scratch")
        assert f"scratch {outer}" in found and "notes" in found
    finally:
        _clean(fleet, outer)


@pytest.mark.parametrize("left", ["file", "symlink"])
def test_what_stands_where_a_tmpfs_went_is_never_removed_or_followed(fleet, tmp_path, left):
    """The tmpfs went by hand; its mount point now holds a file, or was replaced by a
    symlink to a directory with files: the apply leaves them as they are (named or
    forgotten), succeeds, and the check after it is ``ok``."""
    path, data = "/nw", "/root/nw-data"
    fleet.host_vars("pod-4", {"scratch": {path: {"size": "8M"}}})
    try:
        assert _apply(fleet).returncode == 0
        if left == "file":
            fleet.out("pod-4", f"umount {path} && echo mine > {path}/notes")
            shown = f"{path}/notes"
        else:
            fleet.out(
                "pod-4",
                f"umount {path} && rmdir {path} && mkdir -p {data} && echo mine > {data}/notes"
                f" && ln -s {data} {path}",
            )
            shown = f"{data}/notes"
        fleet.host_vars("pod-4", {})
        run = _apply(fleet)
        assert run.returncode == 0, run.stderr
        assert fleet.out("pod-4", f"cat {shown}") == "mine\n"
        if left == "symlink":
            assert fleet.out("pod-4", f"readlink {path}") == f"{data}\n"
        assert _report(fleet, tmp_path)["status"] == "ok"
    finally:
        fleet.out("pod-4", f"rm -rf {data}")
        _clean(fleet, path)


def test_a_mount_of_the_users_below_a_scratch_that_leaves_is_named_not_a_raw_error(fleet, tmp_path):
    """A tmpfs the user mounted inside podstate's: the kernel refuses to unmount the outer
    one; the apply should name it (as for podstate's own below it), not fail on umount."""
    outer, inner = "/nu", "/nu/mine"
    fleet.host_vars("pod-4", {"scratch": {outer: {"size": "16M"}}})
    try:
        assert _apply(fleet).returncode == 0
        fleet.out("pod-4", f"mkdir {inner} && mount -t tmpfs -o size=1M users {inner}")
        fleet.out("pod-4", f"echo mine > {inner}/notes")
        fleet.host_vars("pod-4", {})
        run = _apply(fleet)
        assert fleet.out("pod-4", f"cat {inner}/notes") == "mine\n"
        assert _mounts(fleet, outer) == f"{outer} tmpfs\n{inner} tmpfs\n"
        assert "target is busy" not in run.stderr, run.stderr
        assert run.returncode == 1 and "removal.scratch" in run.stderr, run.stderr
    finally:
        fleet.out("pod-4", f"umount {inner} 2>/dev/null; :")
        _clean(fleet, outer)


def test_a_scratch_below_another_through_a_linked_parent_is_mounted_after_it(fleet, tmp_path):
    """The outer scratch is written through a symlinked parent (an image's /data ->
    /workspace/data), the inner one through the directory, first: the outer tmpfs should
    be mounted first, the inner one in it."""
    real, link = "/nl-real", "/nl-link"
    outer, inner = f"{link}/o", f"{real}/o/in"
    fleet.out("pod-4", f"mkdir -p {real} && ln -sfn {real} {link}")
    fleet.host_vars("pod-4", f"scratch:\n  {inner}: {{size: 4M}}\n  {outer}: {{size: 16M}}\n")
    try:
        run = _apply(fleet)
        assert "not empty: no tmpfs over it" not in run.stderr, run.stderr
        assert run.returncode == 0, run.stderr
        assert _mounts(fleet, real) == f"{real}/o tmpfs\n{inner} tmpfs\n"
    finally:
        fleet.out("pod-4", f"rm -f {link}")
        _clean(fleet, real)


def test_uninstall_discarding_scratch_takes_nested_tmpfs_with_files_in_one_run(fleet, tmp_path):
    """``podstate uninstall --discard-scratch`` with files in both nested tmpfs: both are
    unmounted, inner first, and their mount points go; nothing is mounted there after."""
    outer, inner = "/nd", "/nd/in"
    fleet.host_vars("pod-4", f"scratch:\n  {inner}: {{size: 4M}}\n  {outer}: {{size: 16M}}\n")
    try:
        assert _apply(fleet).returncode == 0
        fleet.out("pod-4", f"echo a > {outer}/a && echo b > {inner}/b")
        done = e2e.run(
            fleet,
            [str(BIN / "podstate"), "uninstall", "--limit", "pod-4", "--discard-scratch"],
            env=fleet.api_env(),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert _mounts(fleet, outer) == ""
        assert fleet.ssh("pod-4", f"test -e {outer}").returncode == 1
    finally:
        _clean(fleet, outer)


def test_nested_scratch_directories_on_a_pod_that_cannot_mount(fleet, tmp_path):
    """pod-1 cannot mount: nested scratch paths, innermost first, are directories; leaving
    the state, the inner one with a file stays with it (and the ones holding it), never
    removed; the check after each apply is ``ok``."""
    top, mid, low = "/nm", "/nm/mid", "/nm/mid/low"
    assert fleet.ssh("pod-1", "mount -t tmpfs t /mnt").returncode != 0  # it cannot mount
    declared = f"scratch:\n  {low}: {{size: 4M}}\n  {mid}: {{size: 8M}}\n  {top}: {{size: 16M}}\n"
    fleet.host_vars("pod-1", declared)
    try:
        run = _apply(fleet, "pod-1")
        assert run.returncode == 0, run.stderr
        assert fleet.out("pod-1", f"stat -c %a {top} {mid} {low}") == "1777\n1777\n1777\n"
        assert _report(fleet, tmp_path, "pod-1")["status"] == "ok"

        fleet.out("pod-1", f"echo mine > {low}/notes")
        fleet.host_vars("pod-1", {})
        run = _apply(fleet, "pod-1")
        assert run.returncode == 0, run.stderr
        assert fleet.out("pod-1", f"cat {low}/notes") == "mine\n"
        assert _report(fleet, tmp_path, "pod-1")["status"] == "ok"
    finally:
        _clean(fleet, top, "pod-1")


def test_an_inner_tmpfs_declared_through_a_link_keeps_the_outer_one_named(fleet, tmp_path):
    """The inner scratch is declared through a symlink into the outer one; the outer one
    leaves, the inner one stays: the outer tmpfs should stay, named (``removal.scratch``),
    not fail on umount."""
    outer, link = "/nk", "/nk-link"
    inner = f"{link}/in"
    fleet.out("pod-4", f"ln -sfn {outer} {link}")
    fleet.host_vars("pod-4", f"scratch:\n  {outer}: {{size: 16M}}\n  {inner}: {{size: 4M}}\n")
    try:
        run = _apply(fleet)
        assert run.returncode == 0, run.stderr
        assert _mounts(fleet, outer) == f"{outer} tmpfs\n{outer}/in tmpfs\n"
        fleet.host_vars("pod-4", f"scratch:\n  {inner}: {{size: 4M}}\n")
        run = _apply(fleet)
        assert _mounts(fleet, outer) == f"{outer} tmpfs\n{outer}/in tmpfs\n"
        assert "target is busy" not in run.stderr, run.stderr
        assert run.returncode == 1 and "removal.scratch" in run.stderr, run.stderr
    finally:
        fleet.out("pod-4", f"rm -f {link}")
        _clean(fleet, outer)


def test_a_scratch_below_a_dirs_directory_comes_and_goes_with_it(fleet, tmp_path):
    """A scratch tmpfs below a ``dirs`` directory: mounted, the check after ``ok``; both
    leaving, one apply unmounts it and takes both directories podstate made."""
    top, inner = "/ndd", "/ndd/s"
    fleet.host_vars("pod-4", {"dirs": {"TMPDIR": top}, "scratch": {inner: {"size": "8M"}}})
    try:
        run = _apply(fleet)
        assert run.returncode == 0, run.stderr
        assert _mounts(fleet, top) == f"{inner} tmpfs\n"
        assert _report(fleet, tmp_path)["status"] == "ok"
        fleet.host_vars("pod-4", {})
        _apply_takes_all(fleet, tmp_path, top)
    finally:
        _clean(fleet, top)


def _uninstall(fleet, *options: str) -> e2e.Run:
    command = [str(BIN / "podstate"), "uninstall", "--limit", "pod-4", *options]
    done = e2e.run(fleet, command, env=fleet.api_env())
    assert "Traceback" not in done.stderr, done.stderr
    return e2e.Run(done.returncode, done.stdout, done.stderr, None)


def test_uninstall_discarding_scratch_keeps_an_outer_tmpfs_with_a_busy_one_below(fleet, tmp_path):
    """``--discard-scratch`` with a process working in the inner tmpfs: the inner one stays
    (busy), and so does the outer one, with its files: discarding never unmounts a tmpfs
    the kernel would refuse, nor takes the files of one that stays."""
    outer, inner = "/nx", "/nx/in"
    fleet.host_vars("pod-4", {"scratch": {outer: {"size": "16M"}, inner: {"size": "8M"}}})
    pid = None
    try:
        assert _apply(fleet).returncode == 0
        fleet.out("pod-4", f"echo mine > {outer}/notes")
        pid = _start(fleet, inner)
        done = _uninstall(fleet, "--discard-scratch")
        said = done.stdout + done.stderr
        assert done.returncode != 0 and "target is busy" not in said, said
        assert f"the mount at {inner} stays in it" in said
        assert _mounts(fleet, outer) == f"{outer} tmpfs\n{inner} tmpfs\n"
        assert fleet.out("pod-4", f"cat {outer}/notes") == "mine\n"
    finally:
        if pid is not None:
            _stop(fleet, pid)
        _clean(fleet, outer)


def test_a_tmpfs_of_the_users_where_podstates_went_is_never_unmounted(fleet, tmp_path):
    """podstate's tmpfs went by hand and the user mounted one of their own there, with a
    file: it is not podstate's, so no removal, not even ``--discard-scratch``, unmounts it."""
    path = "/nv"
    fleet.host_vars("pod-4", {"scratch": {path: {"size": "8M"}}})
    try:
        assert _apply(fleet).returncode == 0
        fleet.out("pod-4", f"umount {path} && mount -t tmpfs -o size=1M users {path}")
        fleet.out("pod-4", f"echo mine > {path}/notes")
        fleet.host_vars("pod-4", None)
        _uninstall(fleet, "--discard-scratch")
        assert fleet.out("pod-4", f"cat {path}/notes 2>&1 || :") == "mine\n"
    finally:
        _clean(fleet, path)


@pytest.mark.parametrize("leaving", ["both", "inner"])
def test_a_tmpfs_of_its_own_for_tmpdir_inside_another_leaves_when_undeclared(
    fleet, tmp_path, leaving
):
    """TMPDIR on a scratch tmpfs of its own, below another scratch tmpfs (a small, separate
    tmpfs for temp files): both mounted, the check after ``ok``. Both leaving the state
    (TMPDIR back to its default), one apply unmounts both, mount points too; the inner one
    alone leaving (TMPDIR stays), one apply unmounts it and TMPDIR is a directory again."""
    outer, inner = "/nt", "/nt/tmp"
    scratch = {outer: {"size": "16M"}, inner: {"size": "4M"}}
    fleet.host_vars("pod-4", {"scratch": scratch, "dirs": {"TMPDIR": inner}})
    try:
        run = _apply(fleet)
        assert run.returncode == 0, run.stderr
        assert _mounts(fleet, outer) == f"{outer} tmpfs\n{inner} tmpfs\n"
        assert _report(fleet, tmp_path)["status"] == "ok"
        if leaving == "both":
            fleet.host_vars("pod-4", {})
        else:
            scratch.pop(inner)
            fleet.host_vars("pod-4", {"scratch": scratch, "dirs": {"TMPDIR": inner}})
        run = _apply(fleet)
        assert "target is busy" not in run.stderr, run.stderr
        assert run.returncode == 0, run.stderr
        if leaving == "both":
            assert _mounts(fleet, outer) == ""
            assert fleet.ssh("pod-4", f"test -e {outer}").returncode == 1
        else:
            assert _mounts(fleet, outer) == f"{outer} tmpfs\n"
            assert fleet.out("pod-4", f"stat -c %a {inner}") == "1777\n"
        assert _report(fleet, tmp_path)["status"] == "ok"
    finally:
        _clean(fleet, outer)


def test_three_levels_scrambled_come_back_in_order_at_a_restart(fleet, tmp_path):
    """Three nested scratch paths, innermost first, with the boot hook: after a restart the
    hook mounts them outermost first, names no error, and the check finds nothing to do."""
    from podstate.sandbox import container

    top, mid, low = "/nr", "/nr/mid", "/nr/mid/low"
    declared = (
        f"scratch:\n  {low}: {{size: 4M}}\n  {top}: {{size: 16M}}\n  {mid}: {{size: 8M}}\n"
        "boot: {hook: true}\n"
    )
    fleet.host_vars("pod-4", declared)
    container.set_start_command(
        "pod-4", "exec bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'"
    )
    try:
        run = _apply(fleet)
        assert run.returncode == 0, run.stderr
        container.restart("pod-4")
        assert _mounts(fleet, top) == f"{top} tmpfs\n{mid} tmpfs\n{low} tmpfs\n"
        assert "error" not in fleet.out("pod-4", "cat /etc/podstate/boot")
        assert _report(fleet, tmp_path)["status"] == "ok"
    finally:
        container.set_start_command("pod-4", None)
        _clean(fleet, top)
