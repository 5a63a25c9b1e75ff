"""podstate passes ``mypy --strict`` as it installs: roles/ inside it, as ``podstate.roles``.

mypy cannot map roles/ to ``podstate.roles`` (setuptools' package-dir), so, as
tests/test_layers.py does for import-linter, the check runs on a copy of podstate/ with
roles/ inside it, under the repository's pyproject.toml. Errors are reported with the
repository's paths (``podstate/roles/x.py`` as ``roles/x.py``).

Every module is held to it: `make test` runs no other mypy.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+(?::\d+)?: error: ")


def repository_path(installed: str) -> str:
    """Return the repository's path of a module of the installed tree: roles/ is installed
    as podstate/roles/, every other path is the same."""
    prefix = "podstate/roles/"
    return "roles/" + installed[len(prefix) :] if installed.startswith(prefix) else installed


def strict_errors(output: str) -> list[str]:
    """Return mypy's error lines in ``output`` (the installed tree's), each with the
    repository's path."""
    found: list[str] = []
    for line in output.splitlines():
        error = _ERROR.match(line)
        if error:
            found.append(repository_path(error["path"]) + line[len(error["path"]) :])
    return found


def _installed_tree(tmp_path: Path) -> None:
    """Lay podstate/ out in ``tmp_path`` as it installs, roles/ inside it."""
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "podstate", tmp_path / "podstate", ignore=skip)
    shutil.copytree(ROOT / "roles", tmp_path / "podstate" / "roles", ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)


def test_podstate_passes_mypy_strict_as_installed(tmp_path: Path) -> None:
    _installed_tree(tmp_path)
    result = subprocess.run(
        [str(Path(sys.executable).with_name("mypy")), "--strict", "--no-incremental", "podstate"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1) and " source files" in output, output  # mypy ran
    errors = strict_errors(output)
    assert errors == [], "mypy --strict, as installed:\n" + "\n".join(errors)
    assert result.returncode == 0, output


def test_errors_are_told_with_the_repository_paths() -> None:
    output = (
        "podstate/roles/env.py:3: error: Missing type arguments  [type-arg]\n"
        "podstate/cli.py:7:2: error: Returning Any  [no-any-return]\n"
        "podstate/cli.py:8: note: a note is not an error\n"
        "Found 2 errors in 2 files (checked 186 source files)\n"
    )
    assert strict_errors(output) == [
        "roles/env.py:3: error: Missing type arguments  [type-arg]",
        "podstate/cli.py:7:2: error: Returning Any  [no-any-return]",
    ]
    assert repository_path("podstate/roles/env.py") == "roles/env.py"
    assert repository_path("podstate/rolesx.py") == "podstate/rolesx.py"
