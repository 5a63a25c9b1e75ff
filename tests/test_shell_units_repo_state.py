"""The probe's reading of a repository (scripts/repo_state.sh), each function run alone under
dash, bash and busybox sh on checkouts made in a temporary directory: no pod.

The script is sourced after scripts/enc.sh (its b64), as the probe sends them; the base64
values it prints are decoded here, so that each assertion reads as what git holds.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.shell_change import Ran, git, sourced


def state(shell: str, text: str) -> Ran:
    """Return what ``text`` did after repo_state.sh (and enc.sh) were sourced."""
    return sourced(shell, ["enc.sh", "repo_state.sh"], text)


def fields(shell: str, path: Path, ref: str = "main", ask: int = 0) -> dict[str, str]:
    """Return repo_state's fields for the checkout at ``path`` (named ``n``), base64 decoded."""
    done = state(shell, f"repo_state n {path} {ref} {ask}")
    assert done.code == 0, done.err
    found = {}
    for line in done.out.splitlines():
        tag, name, field, value = (line.split(" ", 3) + [""])[:4]
        assert (tag, name) == ("repo", "n")
        if field in ("branch", "url", "alone", "dirty"):
            value = base64.b64decode(value).decode()
        found[field] = value
    return found


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of an origin whose main has two commits, the first tagged v1."""
    origin = tmp_path / "origin"
    git("init", "-q", "-b", "main", str(origin))
    git("-C", str(origin), "commit", "-q", "--allow-empty", "-m", "one")
    git("-C", str(origin), "tag", "v1")
    git("-C", str(origin), "commit", "-q", "--allow-empty", "-m", "two")
    git("clone", "-q", str(origin), str(tmp_path / "clone"))
    return tmp_path / "clone"


def rev(checkout: Path, name: str) -> str:
    return git("-C", str(checkout), "rev-parse", name).strip()


def test_repo_kind_names_what_is_no_checkout_of_its_own(
    shell: str, tmp_path: Path, clone: Path
) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "empty").mkdir()
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x").write_text("")
    (clone / "sub").mkdir()
    (clone / "sub" / "x").write_text("")
    paths = ["gone", "file", "empty", "plain", "clone/sub", "clone"]
    kinds = "; ".join(f"repo_name={p} repo_dir={tmp_path}/{p}; repo_kind; echo $?" for p in paths)
    assert state(shell, kinds).out.splitlines() == [
        "repo gone kind absent",
        "1",
        "repo file kind regular_empty_file",
        "1",
        "repo empty kind empty",
        "1",
        "repo plain kind directory",
        "1",
        "repo clone/sub kind directory",
        "1",
        "0",
    ]


def test_a_clone_on_its_branch_says_where_head_and_the_branch_are(shell: str, clone: Path) -> None:
    found = fields(shell, clone)
    assert found == {
        "kind": "repo",
        "head": rev(clone, "HEAD"),
        "branch": "main\n",
        "url": f"{clone.parent}/origin\n",
        "want": f"branch {rev(clone, 'origin/main')}",
        "dirty": "",
    }


def test_a_tag_a_commit_and_an_unknown_ref_are_wanted_as_the_clone_knows_them(
    shell: str, clone: Path
) -> None:
    first = rev(clone, "v1")
    assert fields(shell, clone, "v1")["want"] == f"tag {first}"
    assert fields(shell, clone, first)["want"] == f"commit {first}"
    assert "want" not in fields(shell, clone, "nowhere")
    assert "want" not in fields(shell, clone, first[:12])  # a short hash is no commit here


def test_a_detached_head_says_the_commits_it_alone_holds(shell: str, clone: Path) -> None:
    git("-C", str(clone), "checkout", "-q", "--detach")
    git("-C", str(clone), "commit", "-q", "--allow-empty", "-m", "mine")
    found = fields(shell, clone)
    assert found["branch"] == "" and found["alone"].endswith(" mine\n")
    assert fields(shell, clone, rev(clone, "HEAD"))["alone"] == ""  # the wanted commit holds it


def test_a_dirty_checkout_says_what_git_status_says(shell: str, clone: Path) -> None:
    (clone / "new.txt").write_text("")
    assert fields(shell, clone)["dirty"] == "?? new.txt\n"


def test_repo_remote_asks_origin_where_its_branch_is_now(shell: str, clone: Path) -> None:
    origin = clone.parent / "origin"
    git("-C", str(origin), "commit", "-q", "--allow-empty", "-m", "three")
    assert fields(shell, clone, ask=1)["remote"] == rev(origin, "main")
    git("-C", str(origin), "branch", "-q", "-m", "main", "trunk")
    assert fields(shell, clone, ask=1)["remote"] == "none"
    git("-C", str(clone), "remote", "set-url", "origin", str(clone.parent / "gone"))
    assert fields(shell, clone, ask=1)["remote"] == "?"
    assert "remote" not in fields(shell, clone, ask=0)
