"""Property: what an apply reports done is on the pod, read back by the test's own commands.

For generated desired states (a random choice of env, dirs, path, scratch, shm, nccl,
files, authorized_keys, secrets, packages and repos, with small values that shells find
awkward), the real CLI applies each to two sandbox pods, pod-1 (no mount: scratch is a
directory) and pod-4 (may mount: scratch is a tmpfs, /dev/shm grows). Where the apply exits
0, every declared item is read back over SSH by commands of the test's own (``env -0`` in
each kind of shell, ``stat``, ``findmnt``, ``sha256sum``, ``grep -Fx``, ``dpkg-query``,
``git rev-parse``), never podstate's probe or proof; then ``podstate check`` finds the pods
ok and a second apply changes nothing. A second generated state drops some items and
changes others: what left the state left the pod, and what podstate did not make (a user's
file it wrote over, a user's file in a directory it made, a user's key, a package that was
there before it) is as it was. A last apply of an empty state takes the rest away.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from podstate.desired.errors import Layer
from podstate.desired.spec import resolve
from tests.e2e import Fleet
from tests.readback import (
    DIR_PATHS,
    ENV_NAMES,
    PACKAGES,
    PODS,
    SECRETS,
    Rig,
    Story,
    converge,
    make_rig,
    plant,
    tidy,
)

SANDBOX = {"pods": 4}
USER_FILE = b"the user's own\n"  # at a files path before podstate writes there (mode 640)

# What states are made of. Paths overlap on purpose: a file and a checkout under /opt/rb,
# TMPDIR under a scratch path or not.
TEXT = st.text(st.sampled_from("az Z09_-$`'\"\\\n\t;*%!{}#~é☃\x1b\r"), max_size=12)
SCRATCH = ("/scratch", "/fast")
PATH_DIRS = ("/opt/rb/bin", "/usr/local/rb/bin", "/root/rb-bin")
FILES = ("/opt/rb/conf/b.yaml", "/root/rb-a.txt", "/etc/rb/c.conf")
REPOS = ("/root/code/rb", "/opt/rb/src")


def _some(keys, values) -> st.SearchStrategy[dict]:
    """Return a strategy of dicts on a subset of ``keys`` (maybe empty), each value drawn
    from ``values`` (a strategy, or a function of the key giving one)."""
    pick = values if callable(values) else (lambda _key: values)
    return st.fixed_dictionaries({}, optional={k: pick(k) for k in keys})


SECTIONS: dict[str, st.SearchStrategy] = {
    "env": _some(ENV_NAMES, TEXT),
    "dirs": _some(DIR_PATHS, lambda name: st.sampled_from(DIR_PATHS[name])),
    "path": st.lists(st.sampled_from(PATH_DIRS), unique=True, max_size=3),
    "scratch": _some(
        SCRATCH,
        st.fixed_dictionaries(
            {"size": st.sampled_from(["64M", "100M", "1.5G", 200 << 20])},
            optional={"mode": st.sampled_from(["1777", "0755", "700"])},
        ),
    ),
    "shm": st.fixed_dictionaries({"min_size": st.sampled_from(["64M", "8G", "12G"])}),
    "nccl": _some(("p2p", "ib"), st.sampled_from(["auto", "disable", "leave"])),
    "files": _some(
        FILES,
        st.fixed_dictionaries(
            {"content": TEXT}, optional={"mode": st.sampled_from(["0644", "0600", "0755", "640"])}
        ),
    ),
    "authorized_keys": st.lists(st.integers(0, 2), unique=True, max_size=3),
    "secrets": _some(SECRETS, TEXT),
    "packages": st.fixed_dictionaries(
        {"apt": st.lists(st.sampled_from([*PACKAGES, "bash"]), unique=True, max_size=3)},
        optional={"remove_undeclared": st.booleans()},
    ),
    "repos": _some(REPOS, st.sampled_from(["v1.0", "v1.1", "main", "dev"])),
}
STATE = st.fixed_dictionaries({}, optional=SECTIONS)
KEYED = ("env", "dirs", "scratch", "files", "secrets", "repos")


@st.composite
def smaller(draw, state: dict) -> dict:
    """Return ``state`` with some sections and items dropped and some values changed."""
    out: dict = {}
    for key, value in state.items():
        if draw(st.booleans()):
            continue  # the whole section leaves
        if key in KEYED:
            fresh = draw(SECTIONS[key])
            kept = [k for k in value if draw(st.booleans())]
            out[key] = {
                k: fresh.get(k, value[k]) if draw(st.booleans()) else value[k] for k in kept
            }
        elif key == "packages":
            apt = [p for p in value["apt"] if draw(st.booleans())]
            out[key] = {"apt": apt, "remove_undeclared": draw(st.booleans())}
        else:
            out[key] = value
    return out


@pytest.fixture(scope="module")
def rig(fleet: Fleet, tmp_path_factory) -> Rig:
    """pod-1 and pod-4, made ready once for every example (``make_rig``)."""
    return make_rig(fleet, tmp_path_factory.mktemp("readback"))


@settings(
    max_examples=8,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_what_an_apply_reports_done_is_on_the_pod_and_what_left_the_state_is_gone(rig, data):
    first = data.draw(STATE, label="first")
    second = data.draw(smaller(first), label="second")
    users_file = data.draw(st.sampled_from([None, *FILES]), label="a user's file there first")
    keep = data.draw(st.booleans(), label="a user's file in a directory podstate made")
    story = Story()
    try:
        if users_file:
            plant(rig, story, users_file, USER_FILE, "640")
        converge(rig, story, first)
        scratch = first.get("scratch", {})
        made_dirs = [
            d
            for d in first.get("dirs", {}).values()
            if not any(d.startswith(f"{s}/") for s in scratch)
        ]
        if keep and made_dirs:
            plant(rig, story, f"{made_dirs[0]}/keep.txt", b"mine\n", "600")
        converge(rig, story, second)
        converge(rig, story, {})
    finally:
        tidy(rig, story)


# --- what the property found, as plain cases ----------------------------------------------


def test_a_dirs_directory_leaves_with_the_directories_podstate_made_above_it(rig):
    """``mkdir -p`` for a ``dirs`` variable makes its missing parents; they are podstate's,
    and go with it once empty (they stayed: only the variable's own directory was recorded)."""
    story = Story()
    try:
        converge(rig, story, {"dirs": {"PIP_CACHE_DIR": "/opt/rb/pip", "TMPDIR": "/scratch/tmp"}})
        converge(rig, story, {})
        for pod in PODS:
            assert rig.fleet.out(pod, "ls -d /opt/rb /scratch 2>/dev/null || true") == ""
    finally:
        tidy(rig, story)


def test_a_tmpfs_scratch_takes_a_new_mode(rig):
    """A mode changed in the state reaches a tmpfs already mounted at its size (the apply
    said done and left the old mode: only the size was compared)."""
    story = Story()
    try:
        converge(rig, story, {"scratch": {"/fast": {"size": "64M", "mode": "700"}}})
        converge(rig, story, {"scratch": {"/fast": {"size": "64M"}}})
        assert rig.fleet.out("pod-4", "stat -c %a /fast") == "1777\n"
    finally:
        tidy(rig, story)


def test_a_scratch_mode_written_with_a_leading_zero_is_met_by_one_apply(rig):
    """``mode: "0755"`` is stat's ``755``: the second apply changes nothing (it chmodded the
    directory at every apply, and the check reported drift)."""
    scratch = {"scratch": {"/s": {"size": "1G", "mode": "0755"}}}
    resolved = resolve([Layer("host_vars/p.yaml", scratch)], "p")["scratch"]["/s"]
    assert resolved == {"size": 1 << 30, "mode": "755"}
    story = Story()
    try:
        converge(rig, story, {"scratch": {"/fast": {"size": "64M", "mode": "0755"}}})
    finally:
        tidy(rig, story)


def test_a_tmpfs_scratch_that_leaves_takes_no_declared_directory_with_it(rig):
    """TMPDIR below a scratch path that leaves the state: the tmpfs is unmounted and TMPDIR
    made again below it in the same apply (the apply said done, and TMPDIR was gone until
    the next one), and both go once TMPDIR leaves too."""
    story = Story()
    tmpdir = {"dirs": {"TMPDIR": "/scratch/tmp"}}
    try:
        converge(rig, story, {"scratch": {"/scratch": {"size": "64M"}}, **tmpdir})
        converge(rig, story, tmpdir)
        assert rig.fleet.ssh("pod-4", "findmnt -M /scratch").returncode == 1
        converge(rig, story, {})
    finally:
        tidy(rig, story)
