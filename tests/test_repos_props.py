"""Property: an apply or a removal of a checkout never makes unreachable a commit or a file
that the remote cannot give back; where it would, it refuses and names it.

The real scripts (scripts/repo.sh for an apply, removal.checkout_command for a removal, the
probe's scripts/repo_state.sh for the role's decision) run here, under dash and bash, on a
clone of a bare "remote" in a temporary directory, after random sequences of what a user
does between applies. The promise is checked from git's own reading, not podstate's: before
each run, every commit reachable from a ref, HEAD or a stash entry that the remote lacks,
and the bytes of every file git does not track (and of the whole tree when a tracked file
changed); after it, each commit is still reachable and each file byte-equal. What would have
been lost is read from a copy run the old way (a forced fetch and checkout); the run must
then have refused, naming each such commit (or saying how many more) and file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from podstate.facts import repos as repo_facts
from podstate.operations.removal import checkout_command
from podstate.operations.repos import drift
from podstate.shell import script
from roles.repos import left_behind, problem

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "@1700000000",
    "GIT_COMMITTER_DATE": "@1700000000",
    "GIT_CONFIG_NOSYSTEM": "1",
}
# main: one (v1.0; f, .gitignore, d/a), two (v1.1); dev: two + a tracked out.log (which
# *.log ignores) and d a file where main has a directory.
MAKE_REMOTE = """
set -e
git init -q --bare -b main remote.git
git init -q -b main seed && cd seed
printf '*.log\\ncache/\\n' > .gitignore && echo 1 > f && mkdir d && echo a > d/a
git add . && git commit -qm one && git tag v1.0
echo 2 > f && git commit -qam two && git tag v1.1
git checkout -qb dev && echo log > out.log && git add -f out.log && git rm -q -r d
echo file > d && git add d && git commit -qm dev
git push -q ../remote.git main dev --tags
"""
REFS = ("main", "dev", "v1.0", "v1.1", "TWO")  # TWO: the full hash of "two"

# What a user does between two runs: each action concrete, so that every one is as likely.
USER = st.sampled_from(
    [
        ("commit",),
        ("commit",),
        *(("detach", to) for to in ("HEAD", "v1.0", "v1.1", "origin/dev")),
        *(("switch", to) for to in ("main", "dev", "topic")),
        ("branch", "topic"),
        *(("tag", name) for name in ("mine", "v1.0", "v1.1")),
        ("stash",),
        *(("ignored", name) for name in ("out.log", "d/x.log", "cache/b.bin")),
        ("untracked",),
        ("dirty",),
        ("tidy",),
    ]
)
# A round: what the user does, the ref the desired state then names, and the run.
ROUNDS = st.lists(
    st.tuples(
        st.lists(USER, max_size=3),
        st.sampled_from(REFS),
        st.sampled_from(["apply", "apply", "apply", "remove"]),
    ),
    min_size=1,
    max_size=4,
)


def git(repo: Path, *args: str, check: bool = True) -> str:
    """Return git's output for ``args`` in ``repo``: the test's own reading."""
    run = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=_env(repo)
    )
    if check and run.returncode:
        raise AssertionError(f"git {args}: {run.stderr}")
    return run.stdout


def _env(where: Path) -> dict[str, str]:
    """Return the environment every command here runs in: fixed names and dates, no config
    of this machine's user (HOME is the example's own directory)."""
    return {**os.environ, **ENV, "HOME": str(where.parent)}


def reachable(repo: Path) -> set[str]:
    """Return every commit reachable from a ref, HEAD or a stash entry of ``repo``."""
    stashes = git(repo, "stash", "list", "--format=%H").split()
    return set(git(repo, "rev-list", "--all", *stashes).split())


def loose_files(repo: Path) -> dict[str, bytes]:
    """Return the bytes of each file git does not track in ``repo`` (ignored or not), and of
    every file when a tracked one changed: what no remote can give back."""
    dirty = git(repo, "status", "--porcelain", "--untracked-files=no").strip()
    listed = git(repo, "ls-files", "-z", "--others", *(["--cached"] if dirty else []))
    return {p: (repo / p).read_bytes() for p in listed.split("\0") if (repo / p).is_file()}


def lost_by_force(clone: Path, ref: str, commits: set[str], files: dict[str, bytes]):
    """Return (commits, files, named) that an apply without podstate's guards (a forced fetch
    of tags and a checkout that overwrites ignored files) would make unreachable or change,
    on a copy of ``clone``: what the real apply must refuse over; and the commits its refusal
    must name. A commit the local branch of ``ref`` held counts as lost once the checkout
    moved the branch away from it, even where something else (a stash entry) still holds it:
    the user's branch would no longer. The branch is looked at first: where it would lose
    commits, the refusal names those, and the rest once they are pushed."""
    copy = clone.parent / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(clone, copy, symlinks=True)
    fetch = ["fetch", "-q", "--prune", "--tags", "--force", "origin"]
    git(copy, *fetch, "+refs/heads/*:refs/remotes/origin/*")
    branch = git(copy, "rev-parse", "-q", "--verify", f"refs/heads/{ref}", check=False).strip()
    ways = (("--detach", f"refs/tags/{ref}"), ("-B", f"refs/remotes/origin/{ref}"))
    for kind, name in (*ways, ("--detach", ref)):
        c = git(copy, "rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False).strip()
        if c:
            git(copy, "checkout", "-q", *([kind, ref, c] if kind == "-B" else [kind, c]))
            break
    moved = (
        git(copy, "rev-list", branch, "--not", f"refs/heads/{ref}", check=False) if branch else ""
    )
    from_branch = commits & set(moved.split())
    gone = (commits - reachable(copy)) | from_branch
    changed = {p for p, data in files.items() if not _same(copy / p, data)}
    shutil.rmtree(copy)
    return gone, changed, from_branch or gone


def _same(path: Path, data: bytes) -> bool:
    """Return whether ``path`` is a file holding exactly ``data``."""
    return path.is_file() and not path.is_symlink() and path.read_bytes() == data


def named_all(message: str, commits: set[str]) -> bool:
    """Return whether ``message`` names each of ``commits`` by its short hash, or says that
    more were left unnamed (five are named at most)."""
    return all(c[:7] in message for c in commits) or "more" in message


def names_file(message: str, path: str) -> bool:
    """Return whether git's refusal in ``message`` lists ``path``, or a directory above it
    (git names a directory that would lose the files in it), on a line of its own."""
    parts = path.split("/")
    return any(f"\t{'/'.join(parts[:i])}\n" in message for i in range(1, len(parts) + 1))


class Pod:
    """One example's checkout, its remote and its desired ref, driven like a user and podstate."""

    def __init__(self, root: Path, template: Path, shell: str) -> None:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        shutil.copytree(template, root / "remote.git")
        self.root, self.shell, self.clone = root, shell, root / "code"
        self.url = f"file://{root}/remote.git"
        self.remote = set(git(root / "remote.git", "rev-list", "--all").split())
        self.two = git(root / "remote.git", "rev-parse", "main").strip()
        self.ref, self.made = "v1.0", 0

    def sh(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """Return the run of ``argv`` under this example's shell."""
        return subprocess.run(
            [self.shell, *argv], capture_output=True, text=True, env=_env(self.clone)
        )

    def user(self, action: tuple[str, ...]) -> None:
        """Do ``action`` in the checkout as a user would; what git refuses does nothing."""
        if not (self.clone / ".git").is_dir():
            return
        self.made += 1
        n, c = self.made, self.clone
        steps = {
            "commit": f"echo w{n} > f && git commit -qam 'work {n}'",
            "detach": "git checkout -q --detach {0}",
            "switch": "git checkout -q {0} 2>/dev/null || git checkout -q -b {0}",
            "branch": "git branch {0}",
            "tag": "git tag -f {0}",
            "stash": f"echo s{n} >> f && git stash -q",
            "ignored": f"mkdir -p cache && printf 'mine {n}\\0' > {{0}}",
            "untracked": f"echo {n} > notes.txt",
            "dirty": f"echo {n} >> f",
            "tidy": "rm -f notes.txt && git checkout -q -- .",
        }
        cmd = steps[action[0]].format(*action[1:])
        subprocess.run(["sh", "-c", cmd], cwd=c, capture_output=True, env=_env(c))

    def before(self) -> tuple[set[str], dict[str, bytes]]:
        """Return what the remote cannot give back: commits and loose files."""
        if not (self.clone / ".git").is_dir():
            return set(), {}
        return reachable(self.clone) - self.remote, loose_files(self.clone)

    def kept(self, commits: set[str], files: dict[str, bytes]) -> None:
        """Assert that each of ``commits`` is still reachable and each file byte-equal."""
        assert commits <= reachable(self.clone), commits - reachable(self.clone)
        for p, data in files.items():
            assert _same(self.clone / p, data), p

    def apply(self) -> None:
        """Run an apply as the role and scripts/repo.sh would, and check the promise."""
        commits, files = self.before()
        clean = (self.clone / ".git").is_dir() and not git(
            self.clone, "status", "--porcelain", "--untracked-files=all"
        )
        gone, changed, named = (
            lost_by_force(self.clone, self.ref, commits, files) if clean else ((), (), ())
        )
        if clean:
            self.check_probe(set(gone))
        known = str(self.root / "known_hosts")
        run = self.sh(
            "-c", script("repo.sh"), "repo", str(self.clone), self.url, self.ref, "-", known
        )
        self.kept(commits, files)
        if gone or changed:
            assert run.returncode == 1, (gone, changed, run.stderr)
            # the commits are looked at first: a refusal for them names them all; the files
            # in the way only git's checkout finds, and names, once no commit would be lost
            if gone:
                assert named_all(run.stderr, set(named)), run.stderr
            else:
                assert all(names_file(run.stderr, p) for p in changed), run.stderr
        elif clean:
            assert run.returncode == 0, run.stderr

    def check_probe(self, gone: set[str]) -> None:
        """Assert that the role refuses over the commits only a detached HEAD holds exactly
        when a checkout would lose some, and names them."""
        lines = repo_facts.probe_lines([{"path": str(self.clone), "ref": self.ref, "ask": False}])
        out = self.sh("-c", "\n".join([script("enc.sh"), *lines])).stdout.splitlines()
        state = repo_facts.parse(out).paths[str(self.clone)]
        assert problem(str(self.clone), state, True) is None
        head_only = set(git(self.clone, "rev-list", "HEAD", "--not", "--glob=refs/*").split())
        refuses = bool(state.alone) and drift(str(self.clone), self.url, self.ref, state)
        assert bool(refuses) == bool(gone & head_only), (state, gone, head_only)
        if refuses:
            assert named_all(left_behind(str(self.clone), self.ref, state.alone), head_only)

    def remove(self) -> None:
        """Run the removal's command; check it removed only what the remote gives back."""
        if not (self.clone / ".git").is_dir():
            return
        commits, files = self.before()
        mine = ("HEAD", "--branches", "--tags", "--not", "--remotes")
        shown = set(git(self.clone, "rev-list", *mine).split())
        run = self.sh("-c", checkout_command(str(self.clone), keep_directory=False))
        if run.returncode == 0:
            assert not self.clone.exists()
            assert not commits and not files, (commits, files)
        else:
            self.kept(commits, files)
            assert commits or files or "a branch no remote holds" in run.stderr, run.stderr
            assert named_all(run.stderr, shown), run.stderr


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The bare remote every example copies."""
    where = tmp_path_factory.mktemp("remote")
    subprocess.run(["sh", "-c", MAKE_REMOTE], cwd=where, check=True, env=_env(where / "x"))
    return where / "remote.git"


@pytest.mark.parametrize("shell", ["dash", "bash"])
@settings(max_examples=15, deadline=None)
@given(rounds=ROUNDS)
# found: a commit on the user's main, then a stash on it: the stash still holds the commit,
# but the apply refuses to move main away from it, and must;
@example(rounds=[([], "main", "apply"), ([("commit",), ("stash",)], "main", "apply")])
# and on a detached HEAD, where no branch moves, a stash entry does hold the commit
@example(rounds=[([("commit",), ("stash",)], "main", "apply")])
@example(rounds=[([("commit",), ("stash",), ("commit",)], "main", "apply")])
# a branch that would lose a commit, and a detached HEAD's own: the branch's is named first
@example(rounds=[([], "main", "apply"), ([("commit",)], "v1.0", "apply"),
                 ([("commit",)], "main", "apply")])  # fmt: skip
def test_no_apply_or_removal_loses_what_the_remote_cannot_give_back(
    template, tmp_path_factory, shell, rounds
):
    pod = Pod(tmp_path_factory.getbasetemp() / f"props-{shell}", template, shell)
    pod.apply()  # the first apply clones
    assert git(pod.clone, "rev-parse", "HEAD") == git(pod.clone, "rev-parse", "v1.0^{commit}")
    for actions, ref, run in [*rounds, ([], "v1.0", "remove")]:
        for action in actions:
            pod.user(action)
        pod.ref = pod.two if ref == "TWO" else ref
        pod.apply() if run == "apply" else pod.remove()


# Each case the property found, or that it stands for, as a plain regression test.
@pytest.fixture(params=["dash", "bash"])
def pod(request, template, tmp_path) -> Pod:
    """A fresh clone at v1.0 (detached), under each shell."""
    made = Pod(tmp_path / "pod", template, request.param)
    made.apply()
    return made


def test_a_commit_on_a_detached_head_stops_the_apply_that_would_orphan_it(pod):
    pod.user(("commit",))
    mine = git(pod.clone, "rev-parse", "HEAD").strip()
    for ref in ("v1.0", "main"):  # the same ref, and another
        pod.ref = ref
        pod.apply()  # the property's checks, the probe's refusal among them
        assert git(pod.clone, "rev-parse", "HEAD").strip() == mine
    run = pod.sh("-c", script("repo.sh"), "repo", str(pod.clone), pod.url, "main", "-", "-")
    assert run.returncode == 1
    assert f"would leave behind commits no branch or tag holds ({mine[:7]} work 1)" in run.stderr


@pytest.mark.parametrize("path", ["out.log", "d/x.log"])
def test_an_ignored_file_the_checkout_would_overwrite_or_remove_stops_it(pod, path):
    pod.user(("ignored", path))
    pod.ref = "dev"
    pod.apply()
    assert (pod.clone / path).read_bytes().startswith(b"mine")
    assert git(pod.clone, "rev-parse", "HEAD") == git(pod.clone, "rev-parse", "v1.0^{commit}")


def test_a_commit_only_a_local_tag_holds_survives_the_fetch_of_origins_tag(pod):
    for action in (("detach", "HEAD"), ("commit",), ("tag", "v1.0"), ("detach", "v1.1")):
        pod.user(action)
    mine = git(pod.clone, "rev-parse", "v1.0").strip()
    pod.ref = "v1.1"
    pod.apply()
    assert git(pod.clone, "rev-parse", "v1.0").strip() == mine  # put back after the refusal


def test_a_removal_keeps_and_names_a_commit_only_a_local_tag_holds(pod):
    for action in (("detach", "HEAD"), ("commit",), ("tag", "mine"), ("detach", "v1.0")):
        pod.user(action)
    run = pod.sh("-c", checkout_command(str(pod.clone), keep_directory=False))
    mine = git(pod.clone, "rev-parse", "mine").strip()
    assert run.returncode == 1
    assert f"commits no remote holds ({mine[:7]} work " in run.stderr
