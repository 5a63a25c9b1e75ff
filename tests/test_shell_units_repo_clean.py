"""Whether podstate may remove a checkout (scripts/repo_clean.sh), each function run alone
under dash, bash and busybox sh on checkouts made in a temporary directory: no pod.

Each checkout is a clone of a local origin with one commit, changed in one way a user's
work changes it; repo_work must name that way, and only it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.shell_change import Ran, git, sourced


def clean(shell: str, call: str) -> Ran:
    """Return what ``call`` did after repo_clean.sh was sourced, its last line "STATUS
    repo_work"."""
    return sourced(shell, ["repo_clean.sh"], f'{call}; echo "$? $repo_work"')


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone, with nothing of its own, of an origin with one commit and one file."""
    origin = tmp_path / "origin"
    git("init", "-q", "-b", "main", str(origin))
    (origin / "a.txt").write_text("a\n")
    git("-C", str(origin), "add", "a.txt")
    git("-C", str(origin), "commit", "-q", "-m", "first")
    git("clone", "-q", str(origin), str(tmp_path / "clone"))
    return tmp_path / "clone"


def commit(checkout: Path, message: str) -> None:
    git("-C", str(checkout), "commit", "-q", "--allow-empty", "-m", message)


def ignore(checkout: Path) -> None:
    """Make a file in ``checkout`` that its info/exclude keeps out of git (a checkpoint)."""
    (checkout / ".git" / "info" / "exclude").write_text("*.ckpt\n")
    (checkout / "x.ckpt").write_text("")


WORK: dict[str, tuple[Callable[[Path], object], str]] = {
    "changes": (lambda c: (c / "a.txt").write_text("mine\n"), "changes"),
    "untracked": (lambda c: (c / "b.txt").write_text("b"), "untracked files"),
    "ignored": (ignore, "ignored files"),
    "hidden": (
        lambda c: git("-C", str(c), "update-index", "--assume-unchanged", "a.txt"),
        "files git is told not to check",
    ),
    "worktree": (
        lambda c: git("-C", str(c), "worktree", "add", "-q", "--detach", str(c.parent / "w")),
        "a linked worktree",
    ),
    "branch": (lambda c: git("-C", str(c), "branch", "mine"), "a branch no remote holds"),
    "notes": (
        lambda c: git("-C", str(c), "notes", "add", "-m", "n", "HEAD"),
        "refs of its own",
    ),
}


def test_a_clone_with_nothing_of_its_own_may_go(shell: str, clone: Path) -> None:
    assert clean(shell, f"repo_clean {clone}").out == "0 \n"


@pytest.mark.parametrize("kind", list(WORK))
def test_each_kind_of_work_is_named_alone(shell: str, clone: Path, kind: str) -> None:
    make, words = WORK[kind]
    make(clone)
    assert clean(shell, f"repo_clean {clone}").out == f"1 {words}\n"


def test_commits_no_remote_holds_are_named_five_at_most(shell: str, clone: Path) -> None:
    commit(clone, "one")
    out = clean(shell, f"repo_clean {clone}").out
    assert out.startswith("1 commits no remote holds (") and out.endswith(" one)\n")
    for n in range(6):
        commit(clone, f"more {n}")
    out = clean(shell, f"repo_clean {clone}").out
    assert out.count("; ") == 5 and out.endswith("; and more)\n")


def test_a_stash_is_named(shell: str, clone: Path) -> None:
    (clone / "a.txt").write_text("mine\n")
    git("-C", str(clone), "stash", "-q")
    out = clean(shell, f"repo_clean {clone}").out
    assert out == "1 a stash\n"  # HEAD holds the commit the stash is made on


def test_what_is_no_checkout_is_what_git_cannot_read(shell: str, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "broken" / ".git").mkdir(parents=True)
    assert clean(shell, f"repo_clean {tmp_path}/plain").out == "1 what git cannot read\n"
    assert clean(shell, f"repo_clean {tmp_path}/broken").out == "1 what git cannot read\n"


def test_repo_status_hidden_and_refs_each_add_their_kinds(shell: str, clone: Path) -> None:
    (clone / "a.txt").write_text("mine\n")
    (clone / "b.txt").write_text("b")
    git("-C", str(clone), "branch", "mine")
    git("-C", str(clone), "update-ref", "refs/stash", "HEAD")
    call = f"repo_p={clone} repo_work=; repo_status; repo_hidden; repo_refs"
    done = clean(shell, call + '; echo "stash=$repo_stash own=$repo_other_refs"')
    lines = done.out.splitlines()
    assert lines == ["stash=1 own=", "0 changes, untracked files, a branch no remote holds"]


def test_repo_add_adds_each_kind_once(shell: str) -> None:
    call = "repo_work=; repo_add changes; repo_add 'a stash'; repo_add changes"
    assert clean(shell, call).out == "0 changes, a stash\n"
