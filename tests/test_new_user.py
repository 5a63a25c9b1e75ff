"""End to end, as a new user: podstate from a wheel (``uv tool install``, which gives both
``podstate`` and ``pyinfra``), ``podstate init`` in an empty directory, a pod's address and
one value of theirs, an apply with pyinfra and a check on a sandbox pod; then a newer build
(a version bump, a new shipped default, a starter file of a newer version) installed over
it: the user's files are untouched, the check names the new default as drift and every run
names the aged starter file, ``podstate init --update`` rewrites only that file, and an
apply brings the new default to the pod.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import BIN, ROOT
from tests.test_deploy_dir import copy_project

SANDBOX = {"pods": 1}
POD = "pod-1"
NEW_DEFAULT = "PODSTATE_NEW_DEFAULT"  # the variable the newer build's defaults add to env


def _build(source: Path, wheels: Path) -> Path:
    """Return the wheel of the project at ``source``, built as a release is."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    return next(wheels.glob("podstate-*.whl"))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> tuple[Path, Path]:
    """Return this checkout's wheel, and a newer one: its version bumped, a new default in
    its shipped defaults, its inventory starter file one version on. Each is built from a
    copy of the tree, so that a build beside this one shares no build folder."""
    work = tmp_path_factory.mktemp("wheels")
    first = _build(copy_project(work / "first"), work / "first-wheel")
    newer = copy_project(work / "newer")
    edits = {
        "pyproject.toml": (r'(?m)^version = "([^"+]+)"$', r'version = "\1+newer"'),
        "podstate/desired/defaults.yaml": (r"(?m)^env:\n", f'env:\n  {NEW_DEFAULT}: "yes"\n'),
        "podstate/repository/starter.py": (
            r'"inventories/pods.py": \(1, INVENTORY\)',
            '"inventories/pods.py": (2, INVENTORY)',
        ),
    }
    for name, (pattern, replacement) in edits.items():
        text, count = re.subn(pattern, replacement, (newer / name).read_text())
        assert count == 1, f"{name}: {pattern} is not there once"
        (newer / name).write_text(text)
    return first, _build(newer, work / "newer-wheel")


def _user_env(home: Path, sandbox: Path) -> dict[str, str]:
    """Return a new user's environment: none of podstate's variables (the pods file and vars
    are the repository's own), the tools' folder first on PATH, nothing that would import
    this checkout instead of the installed podstate; the sandbox's state for its pods."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PODSTATE_", "RUNPOD_", "VAST_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        PATH=f"{home / 'bin'}:{env['PATH']}",
        UV_TOOL_DIR=str(home / "tools"),
        UV_TOOL_BIN_DIR=str(home / "bin"),
        UV_PYTHON_DOWNLOADS="never",
        UV_CACHE_DIR=os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv"),
        PODSTATE_SANDBOX=str(sandbox),
    )
    return env


def _files(root: Path) -> dict[str, bytes]:
    """Return the user's files below ``root`` (not Python's caches) and their bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_a_new_user_installs_inits_applies_and_upgrades(fleet, wheels, tmp_path):
    first, newer = wheels
    home = tmp_path / "home"
    env = _user_env(home, fleet.state)
    repo = tmp_path / "fleet"

    def run(*command: str, cwd: Path = repo) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def install(wheel: Path) -> None:
        python = f"--python={sys.executable}"  # its interpreter's, never one downloaded
        done = run(str(BIN / "uv"), "tool", "install", python, "--with-executables-from",
                   "pyinfra", str(wheel), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert (home / "bin" / "pyinfra").exists() and (home / "bin" / "podstate").exists()

    install(first)
    python = str(home / "tools" / "podstate" / "bin" / "python")
    where = run(python, "-c", "import podstate; print(podstate.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert ROOT.as_posix() not in where.stdout  # podstate comes from the wheel
    made = run("podstate", "init", str(repo), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    # the user lists their pod, and sets one value of their own
    (repo / "inventories" / "pods.yaml").write_text(fleet.pods_file.read_text())
    with open(repo / "inventories" / "group_vars" / "all.yaml", "a") as f:
        f.write("\nenv:\n  TEAM: ml\n")
    applied = run("pyinfra", "-y", "inventories/pods.py", "deploy/pod.py")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    checked = run("podstate", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = run("podstate", "show", POD)
    assert re.search(r'TEAM: "ml" +# inventories/group_vars/all.yaml', shown.stdout), shown
    assert re.search(r'TMPDIR: "/scratch/tmp" +# shipped default', shown.stdout), shown
    assert fleet.out(POD, "echo $TEAM") == "ml\n"

    mine = _files(repo)
    install(newer)
    assert _files(repo) == mine  # an upgrade changes none of the user's files
    drift = run("podstate", "check", "--diff")
    assert drift.returncode == 2, drift.stdout + drift.stderr
    assert NEW_DEFAULT in drift.stdout
    aged = "inventories/pods.py is podstate's starter file version 1; podstate"
    assert aged in drift.stderr and "run `podstate init --update`" in drift.stderr
    assert re.search(
        rf'{NEW_DEFAULT}: "yes" +# shipped default', run("podstate", "show", POD).stdout
    )

    updated = run("podstate", "init", "--update")
    assert updated.returncode == 0, updated.stderr
    now = _files(repo)
    assert {p for p in now if now[p] != mine.get(p)} == {"inventories/pods.py"}
    assert now["inventories/pods.py"].startswith(b"# podstate starter file, version 2 ")
    applied = run("pyinfra", "-y", "inventories/pods.py", "deploy/pod.py")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "starter file" not in applied.stderr
    checked = run("podstate", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert fleet.out(POD, f"echo ${NEW_DEFAULT}") == "yes\n"
