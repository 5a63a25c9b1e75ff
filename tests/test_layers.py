"""The structure of podstate/: its layers and circles (import-linter's contracts in
pyproject.toml), modules of a readable size, and packages whose ``__init__`` only names them.
bench/ keeps the same size of module and the same ``__init__``.

roles/ installs as ``podstate.roles``; import-linter reads a package's files from one
folder, so the contracts are checked on a copy of podstate/ with roles/ inside it.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def _modules() -> list[Path]:
    return (
        sorted((ROOT / "podstate").rglob("*.py"))
        + sorted((ROOT / "roles").glob("*.py"))
        + sorted((ROOT / "bench").rglob("*.py"))
    )


def test_import_contracts_hold(tmp_path):
    shutil.copytree(
        ROOT / "podstate", tmp_path / "podstate", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        ROOT / "roles",
        tmp_path / "podstate" / "roles",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.split("Contracts:")[-1].split("kept")[0]


def test_no_module_is_over_the_limit():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"over {MAX_LINES} lines: {long}"


def test_a_package_init_only_names_its_package():
    for init in [*(ROOT / "podstate").rglob("__init__.py"), *(ROOT / "bench").rglob("__init__.py")]:
        body = ast.parse(init.read_text()).body
        code = [
            n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        assert code == [], f"{init.relative_to(ROOT)} holds code: move it to a module"


def test_every_package_is_installed():
    """pyproject lists the packages by hand (roles/ and schema/ install inside podstate), so
    a new subpackage that it leaves out would be missing from the wheel."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "podstate").rglob("__init__.py")
    }
    assert found - listed == set()
