"""The clone, fetch and checkout of a repository (scripts/repo.sh), each function run alone
under dash, bash and busybox sh on an origin and a checkout in a temporary directory that
stands for the pod's filesystem: no pod, no network.

The script is sourced with PODSTATE_REPO_PART=functions, which defines its functions and
runs nothing (set -eu stays on, as on a pod); a test sets the variables repo_main sets and
calls one function in a subshell, since a refusal exits. tests/test_repos_props.py holds the
whole script to its promise on generated histories.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from podstate.shell import script
from tests.shell_change import Ran, git, run, sourced


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """An origin whose main has two commits, the first tagged v1."""
    origin = tmp_path / "origin"
    git("init", "-q", "-b", "main", str(origin))
    git("-C", str(origin), "commit", "-q", "--allow-empty", "-m", "one")
    git("-C", str(origin), "tag", "v1")
    (origin / "f.txt").write_text("two\n")
    git("-C", str(origin), "add", "f.txt")
    git("-C", str(origin), "commit", "-q", "-m", "two")
    return origin


def repo(shell: str, path: Path, origin: Path, ref: str, call: str) -> Ran:
    """Return what ``call`` did in a subshell, with repo_main's variables set for PATH
    ``path``, URL ``origin`` and REF ``ref`` (no key)."""
    setup = (
        f"repo_path={path} repo_url={origin} repo_ref={ref} repo_key=- repo_known=-\n"
        "repo_tmp='' repo_tags='' repo_tips='' repo_dir=''\n"
    )
    env = {"PODSTATE_REPO_PART": "functions", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return sourced(shell, ["repo.sh"], f"{setup}({call})", env)


def head(checkout: Path) -> str:
    return git("-C", str(checkout), "rev-parse", "HEAD").strip()


def test_repo_open_clones_beside_an_absent_path_without_a_checkout(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    path = tmp_path / "code" / "x"
    done = repo(shell, path, origin, "main", 'repo_open; echo "$repo_dir"; trap - EXIT')
    clone = Path(done.out.strip())
    assert done.code == 0 and clone.parent == path.parent and clone.name.startswith(".x.podstate.")
    assert not path.exists() and not (clone / "f.txt").exists()


def test_repo_open_refuses_a_checkout_with_local_changes(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    git("clone", "-q", str(origin), str(tmp_path / "c"))
    (tmp_path / "c" / "mine.txt").write_text("")
    done = repo(shell, tmp_path / "c", origin, "main", "repo_open")
    assert (done.code, done.err) == (
        1,
        f"podstate: {tmp_path}/c: has local changes or untracked files; left as it is\n",
    )


def test_repo_resolve_finds_a_tag_a_branch_and_a_commit(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    git("clone", "-q", str(origin), str(tmp_path / "c"))
    first = git("-C", str(origin), "rev-parse", "v1").strip()
    show = 'repo_dir=$repo_path; repo_resolve; echo "$repo_how $repo_commit"'
    found = [repo(shell, tmp_path / "c", origin, ref, show).out for ref in ("v1", "main", first)]
    assert found == [f"--detach {first}\n", f"-B {head(origin)}\n", f"--detach {first}\n"]
    done = repo(shell, tmp_path / "c", origin, "nowhere", show)
    assert done.code == 1 and done.err.endswith(f"{origin} has no tag, branch or commit nowhere\n")


def test_repo_resolve_refuses_a_local_branch_ahead_of_origin(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    clone = tmp_path / "c"
    git("clone", "-q", str(origin), str(clone))
    git("-C", str(clone), "commit", "-q", "--allow-empty", "-m", "mine")
    done = repo(shell, clone, origin, "main", "repo_dir=$repo_path; repo_resolve")
    assert done.code == 1
    assert "the local branch main has commits that origin/main lacks (" in done.err
    assert done.err.endswith(" mine): push or move them\n")


def test_repo_kept_refuses_to_leave_a_detached_commit_behind(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    clone = tmp_path / "c"
    git("clone", "-q", str(origin), str(clone))
    git("-C", str(clone), "checkout", "-q", "--detach")
    git("-C", str(clone), "commit", "-q", "--allow-empty", "-m", "lost")
    call = f"repo_dir=$repo_path repo_tips={head(clone)} repo_commit={head(origin)}; repo_kept"
    done = repo(shell, clone, origin, "main", call)
    assert done.code == 1 and "would leave behind commits no branch or tag holds (" in done.err
    call = f"repo_dir=$repo_path repo_tips={head(origin)} repo_commit={head(origin)}; repo_kept"
    assert repo(shell, clone, origin, "main", call).code == 0


def test_repo_named_names_five_commits_and_how_many_more(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    for n in range(7):
        git("-C", str(origin), "commit", "-q", "--allow-empty", "-m", f"c{n}")
    done = repo(shell, origin, origin, "main", "repo_dir=$repo_path; repo_named HEAD --not v1")
    assert done.out.count("; ") == 5 and done.out.endswith("; 3 more")
    assert done.out.split("; ")[0].endswith(" c6")


def test_repo_restore_puts_back_the_tags_the_fetch_moved(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    first = git("-C", str(origin), "rev-parse", "v1").strip()
    git("-C", str(origin), "tag", "-f", "v1", "HEAD")
    call = f"repo_dir=$repo_path repo_tags='{first} refs/tags/v1'; repo_restore"
    assert repo(shell, origin, origin, "main", call).code == 0
    assert git("-C", str(origin), "rev-parse", "v1").strip() == first


def test_repo_main_clones_checks_out_and_removes_the_key(
    shell: str, tmp_path: Path, origin: Path
) -> None:
    path, key = tmp_path / "code" / "x", tmp_path / "key"
    key.write_text("not a key: the origin is a local path")
    text = script("repo.sh")
    args = f"repo {path} {origin} v1 {key} {tmp_path}/ssh/known_hosts"
    done = run(shell, f"set -- {args}; shift\n{text}", {"GIT_CONFIG_GLOBAL": "/dev/null"})
    assert done.code == 0, done.err
    assert head(path) == git("-C", str(origin), "rev-parse", "v1").strip()
    assert not key.exists() and (tmp_path / "ssh").is_dir()
    assert [p.name for p in path.parent.iterdir()] == ["x"]
