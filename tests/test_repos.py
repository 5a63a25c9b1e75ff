"""End to end: repos, from local bare repositories, one of them reached over SSH with a deploy key.

Every pod has the same bare repository at /srv/git/trainer.git (fixed dates, so the same
commits everywhere): main at "two" (tag v1.1), v1.0 one commit before, dev one after. pod-1
serves /srv/git/private.git over its own sshd, to a deploy key the test makes; every pod
clones it with that key (``repos.<path>.ssh_key``).
"""

import json
import os
import subprocess

import pytest

from podstate.facts.repos import UNKNOWN, Checkout
from roles.repos import cloned
from tests.e2e import apply, check, exec_count
from tests.record_entries import entry as line_entry

SANDBOX = {"pods": 3}
KEY_VAR = "PODSTATE_TEST_DEPLOY_KEY"
MAKE_ORIGIN = """
set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t
export GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=@1700000000 GIT_COMMITTER_DATE=@1700000000
rm -rf {bare} /tmp/work && mkdir -p /srv/git
git init -q --bare -b main {bare}
git init -q -b main /tmp/work && cd /tmp/work
echo one > f && git add f && git commit -qm one && git tag v1.0
echo two > f && git commit -qam two && git tag v1.1
git checkout -qb dev && echo dev > f && git commit -qam dev && git checkout -q main
git push -q {bare} main dev --tags && rm -rf /tmp/work
"""


def sha(fleet, pod: str, ref: str, repo: str = "/srv/git/trainer.git") -> str:
    return fleet.out(pod, f"git -C {repo} rev-parse {ref}^{{commit}}").strip()


def head(fleet, pod: str, path: str) -> str:
    return fleet.out(pod, f"git -C {path} rev-parse HEAD").strip()


@pytest.fixture(scope="module")
def repos(fleet, tmp_path_factory):
    """The fleet after the first apply, with the state it was given and what came before."""
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    for pod in fleet.pods:
        fleet.out(pod, MAKE_ORIGIN.format(bare="/srv/git/trainer.git"))
    fleet.out("pod-1", MAKE_ORIGIN.format(bare="/srv/git/private.git"))
    keys = tmp_path_factory.mktemp("deploy-key")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id")], check=True
    )
    public = (keys / "id.pub").read_text().strip()
    fleet.out("pod-1", f"echo '{public}' >> /root/.ssh/authorized_keys")
    os.environ[KEY_VAR] = (keys / "id").read_text()
    port = fleet.pods["pod-1"]["ssh_port"]
    wanted = {
        "/root/code/trainer": {"url": "file:///srv/git/trainer.git", "ref": "v1.0"},
        "/root/code/dev": {"url": "file:///srv/git/trainer.git", "ref": "main"},
        "/root/code/private": {
            "url": f"ssh://root@127.0.0.1:{port}/srv/git/private.git",
            "ref": "main",
            "ssh_key": {"from_env": KEY_VAR},
        },
    }
    fleet.group_vars("all", {"repos": wanted}, merge=True)
    ssh_dirs = {pod: fleet.out(pod, "ls -lA /root/.ssh; cat /root/.ssh/*") for pod in fleet.pods}
    yield apply(fleet), ssh_dirs
    os.environ.pop(KEY_VAR, None)


def test_first_apply_converges_every_pod(repos):
    run, _ = repos
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_a_tag_is_checked_out_detached(fleet, repos, pod):
    assert head(fleet, pod, "/root/code/trainer") == sha(fleet, pod, "v1.0")
    assert fleet.ssh(pod, "git -C /root/code/trainer symbolic-ref -q HEAD").returncode == 1


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_a_branch_is_checked_out_at_origins_head(fleet, repos, pod):
    assert head(fleet, pod, "/root/code/dev") == sha(fleet, pod, "main")
    branch = fleet.out(pod, "git -C /root/code/dev symbolic-ref --short HEAD").strip()
    assert branch == "main"


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_the_private_repository_came_over_ssh_with_the_deploy_key(fleet, repos, pod):
    assert head(fleet, pod, "/root/code/private") == sha(
        fleet, "pod-1", "main", "/srv/git/private.git"
    )
    assert "ssh://root@127.0.0.1" in fleet.out(
        pod, "git -C /root/code/private remote get-url origin"
    )


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_the_deploy_key_left_no_trace(fleet, repos, pod):
    _, ssh_dirs = repos
    assert fleet.out(pod, "ls -A /etc/podstate/secrets") == ""
    config = fleet.out(pod, "cat /root/code/private/.git/config")
    assert "sshCommand" not in config and "podstate" not in config
    assert fleet.out(pod, "ls -lA /root/.ssh; cat /root/.ssh/*") == ssh_dirs[pod]
    key_line = os.environ[KEY_VAR].splitlines()[2]  # [1] is the same for every key
    found = fleet.ssh(pod, f"grep -rlF -- '{key_line}' /root /etc /tmp /run 2>/dev/null")
    assert found.stdout == ""


def test_second_apply_is_quiet(fleet, repos):
    again = apply(fleet)
    assert again.returncode == 0, again.stderr
    assert again.hosts("success") == set()


def test_check_is_ok_and_costs_one_command(fleet, repos):
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    result = check(fleet)
    assert result.returncode == 0, result.stdout
    # the probe; on pod-1, which serves the private repository, also the one git ls-remote
    # this machine runs with the deploy key for every pod
    assert {pod: exec_count(fleet, pod) - before[pod] for pod in fleet.pods} == {
        "pod-1": 2,
        "pod-2": 1,
        "pod-3": 1,
    }


def test_a_hand_checkout_is_drift_on_that_pod_alone(fleet, repos, tmp_path):
    fleet.out("pod-2", "git -C /root/code/trainer checkout -q v1.1")
    result = check(fleet, "--json", str(tmp_path / "r.json"))
    pods = json.loads((tmp_path / "r.json").read_text())["pods"]
    assert result.returncode == 2
    assert {name: pod["status"] for name, pod in pods.items()} == {
        "pod-1": "ok",
        "pod-2": "drift",
        "pod-3": "ok",
    }
    want = (
        f"/root/code/trainer at {sha(fleet, 'pod-2', 'v1.1')[:7]}, "
        f"want v1.0 ({sha(fleet, 'pod-2', 'v1.0')[:7]})"
    )
    assert pods["pod-2"]["changes"] == [
        {"role": "Repos", "operation": want, "file": "deploy/pod.py"}
    ]
    assert f"would change: Repos | {want}" in result.stdout
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    assert head(fleet, "pod-2", "/root/code/trainer") == sha(fleet, "pod-2", "v1.0")


def test_a_changed_ref_is_fetched_and_checked_out(fleet, repos):
    fleet.host_vars(
        "pod-1",
        {"repos": {"/root/code/dev": {"url": "file:///srv/git/trainer.git", "ref": "dev"}}},
    )
    try:
        run = apply(fleet, "--limit", "pod-1")
        assert run.returncode == 0, run.stderr
        assert head(fleet, "pod-1", "/root/code/dev") == sha(fleet, "pod-1", "dev")
    finally:
        fleet.host_vars("pod-1", None)


def test_a_full_commit_ref_is_checked_out_detached(fleet, repos):
    commit = sha(fleet, "pod-1", "dev")
    fleet.host_vars(
        "pod-1",
        {"repos": {"/root/code/pinned": {"url": "file:///srv/git/trainer.git", "ref": commit}}},
    )
    try:
        run = apply(fleet, "--limit", "pod-1")
        assert run.returncode == 0, run.stderr
        assert head(fleet, "pod-1", "/root/code/pinned") == commit
        detached = fleet.ssh("pod-1", "git -C /root/code/pinned symbolic-ref -q HEAD")
        assert detached.returncode == 1
        assert check(fleet, "--limit", "pod-1").returncode == 0
    finally:
        fleet.host_vars("pod-1", None)


def test_a_changed_url_is_drift_and_the_apply_fetches_from_it(fleet, repos, tmp_path):
    mirror = "file:///srv/git/mirror.git"
    fleet.out("pod-2", "git clone -q --bare /srv/git/trainer.git /srv/git/mirror.git")
    fleet.host_vars("pod-2", {"repos": {"/root/code/trainer": {"url": mirror, "ref": "v1.0"}}})
    try:
        result = check(fleet, "--limit", "pod-2", "--json", str(tmp_path / "r.json"))
        pods = json.loads((tmp_path / "r.json").read_text())["pods"]
        assert result.returncode == 2, result.stdout
        assert pods["pod-2"]["changes"][0]["operation"] == (
            f"/root/code/trainer fetches from file:///srv/git/trainer.git, want {mirror}"
        )
        run = apply(fleet, "--limit", "pod-2")
        assert run.returncode == 0, run.stderr
        url = fleet.out("pod-2", "git -C /root/code/trainer config remote.origin.url")
        assert url == mirror + "\n"
        assert check(fleet, "--limit", "pod-2").returncode == 0
    finally:
        fleet.host_vars("pod-2", None)
    assert apply(fleet, "--limit", "pod-2").returncode == 0  # back to the shared origin


def test_a_dirty_working_tree_is_a_violation_and_left_as_it_is(fleet, repos):
    fleet.out(
        "pod-3", "cd /root/code/trainer && git checkout -q v1.1 && echo mine > f && touch new"
    )
    before = fleet.out(
        "pod-3", "cd /root/code/trainer && git rev-parse HEAD && git status -s && cat f"
    )
    run = apply(fleet)
    assert run.returncode == 1
    assert run.hosts("error") == {"pod-3"}
    assert (
        "repos./root/code/trainer: /root/code/trainer has local changes (1 changed, 1 untracked: "
        "f, new)"
    ) in run.stderr
    after = fleet.out(
        "pod-3", "cd /root/code/trainer && git rev-parse HEAD && git status -s && cat f"
    )
    assert after == before
    fleet.out("pod-3", "cd /root/code/trainer && git checkout -q -- f && rm new")


def test_a_commit_on_a_detached_checkout_is_a_violation_and_kept(fleet, repos):
    fleet.out(
        "pod-1",
        "git -C /root/code/trainer -c user.name=t -c user.email=t@example.com "
        "commit -q --allow-empty -m 'my experiment'",
    )
    mine = head(fleet, "pod-1", "/root/code/trainer")
    message = (
        "/root/code/trainer: a checkout of v1.0 would leave behind commits only its detached "
        f"HEAD holds ({mine[:7]} my experiment): podstate leaves it as it is"
    )
    try:
        result = check(fleet, "--limit", "pod-1")
        run = apply(fleet, "--limit", "pod-1")
        assert result.returncode == 1 and f"violation (Repos): {message}" in result.stdout
        assert run.returncode == 1
        assert f"repos./root/code/trainer: {message}" in run.stderr
        assert head(fleet, "pod-1", "/root/code/trainer") == mine
    finally:
        fleet.out("pod-1", "git -C /root/code/trainer checkout -q --detach v1.0")


def test_no_git_is_a_violation_that_says_to_install_it(fleet, repos):
    fleet.out("pod-2", "mv /usr/bin/git /usr/bin/git.hidden")
    try:
        run = apply(fleet)
    finally:
        fleet.out("pod-2", "mv /usr/bin/git.hidden /usr/bin/git")
    assert run.hosts("error") == {"pod-2"}
    assert "git is not installed on this pod: add git to packages.apt" in run.stderr


def test_a_missing_deploy_key_stops_the_run_before_contact(fleet, repos):
    value = os.environ.pop(KEY_VAR)
    try:
        before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
        run = apply(fleet)
        assert {pod: exec_count(fleet, pod) for pod in fleet.pods} == before
    finally:
        os.environ[KEY_VAR] = value
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    assert (
        f"repos./root/code/private.ssh_key.from_env: the environment variable {KEY_VAR} is not "
        "set" in run.stderr + run.stdout
    )


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"url": "file:///x"}, "'ref' is required"),
        ({"url": "file:///x", "ref": "--upload-pack=x"}, "is not a tag, branch or commit"),
        ({"url": "file:///x", "ref": "v1", "ssh_key": "abc"}, "expected a mapping, got a string"),
    ],
)
def test_bad_repos_are_one_line_before_contact(fleet, repos, item, message):
    fleet.host_vars("pod-1", {"repos": {"/root/code/bad": item}})
    try:
        run = apply(fleet)
    finally:
        fleet.host_vars("pod-1", None)
    assert run.returncode != 0
    assert message in run.stderr + run.stdout
    assert "Traceback" not in run.stderr


ONE_MORE = (
    "set -e; rm -rf /tmp/w && git clone -q /srv/git/trainer.git /tmp/w && cd /tmp/w && "
    "git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m three && "
    "git push -q origin main && rm -rf /tmp/w"
)


def test_a_branch_moved_upstream_is_drift_and_apply_follows_it(fleet, repos, tmp_path):
    fetched = sha(fleet, "pod-3", "main")
    fleet.out("pod-3", ONE_MORE)
    moved = sha(fleet, "pod-3", "main")
    result = check(fleet, "--json", str(tmp_path / "r.json"))
    pods = json.loads((tmp_path / "r.json").read_text())["pods"]
    assert result.returncode == 2, result.stdout
    assert {name: pod["status"] for name, pod in pods.items()} == {
        "pod-1": "ok",
        "pod-2": "ok",
        "pod-3": "drift",
    }
    assert pods["pod-3"]["changes"][0]["operation"] == (
        f"/root/code/dev at {fetched[:7]}, origin moved main to {moved[:7]} since the last "
        f"fetch ({fetched[:7]})"
    )
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    assert head(fleet, "pod-3", "/root/code/dev") == moved
    assert check(fleet).returncode == 0


def test_an_origin_that_cannot_be_asked_is_reported_and_nothing_changes(fleet, repos):
    fleet.out("pod-2", "mv /srv/git/trainer.git /srv/git/away.git")
    try:
        before = head(fleet, "pod-2", "/root/code/dev")
        result = check(fleet)
        run = apply(fleet)
    finally:
        fleet.out("pod-2", "mv /srv/git/away.git /srv/git/trainer.git")
    message = (
        "/root/code/dev: origin (file:///srv/git/trainer.git) could not be asked where main "
        "is now: compared with the clone's last fetch"
    )
    assert result.returncode == 1 and f"violation (Repos): {message}" in result.stdout
    assert run.hosts("error") == {"pod-2"} and f"repos./root/code/dev: {message}" in run.stderr
    assert head(fleet, "pod-2", "/root/code/dev") == before


def test_a_private_branch_moved_upstream_is_asked_with_the_key_from_here(fleet, repos):
    fleet.out("pod-1", ONE_MORE.replace("trainer", "private"))
    moved = sha(fleet, "pod-1", "main", repo="/srv/git/private.git")
    result = check(fleet)
    assert result.returncode == 2, result.stdout
    assert result.stdout.count(f"origin moved main to {moved[:7]}") == len(fleet.pods)
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    for pod in fleet.pods:
        assert head(fleet, pod, "/root/code/private") == moved
    assert check(fleet).returncode == 0


@pytest.mark.parametrize(
    ("state", "there", "was", "fields"),
    [
        (Checkout(kind="absent"), None, None, ()),
        (Checkout(kind="empty"), "directory", None, ("emptied",)),
        (Checkout(kind="repo"), "directory", None, None),  # the user's checkout
        (Checkout(kind="repo"), "directory", line_entry("repo", "/r", "emptied"), ("emptied",)),
        (UNKNOWN, None, None, ()),  # git comes in this run: the clone makes the path
        (UNKNOWN, "directory", None, None),  # may hold someone's files: not podstate's
        (UNKNOWN, "directory", line_entry("repo", "/r"), ()),
    ],
)
def test_the_record_names_a_checkout_podstate_clones_and_no_other(state, there, was, fields):
    expected = None if fields is None else line_entry("repo", "/r", *fields)
    assert cloned("/r", state, there, was) == expected
