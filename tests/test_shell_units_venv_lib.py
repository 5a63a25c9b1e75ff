"""The functions the venv scripts share (scripts/venv_lib.sh) and uv's install with pip
(scripts/uv_install.sh), each run alone under dash, bash and busybox sh on a temporary
directory standing for the pod's filesystem: no pod, no index.

The caller's variables (WHAT, LOG, venv_dir) are set as venv.sh and uv_install.sh set them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fixtures.venv.wheels import binary_wheel
from tests.shell_change import Ran, sourced


def lib(shell: str, tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Ran:
    """Return what ``text`` did after venv_lib.sh was sourced, its log ``tmp_path/log``."""
    setup = f"WHAT=build LOG={tmp_path}/log venv_dir={tmp_path}/v\n"
    return sourced(shell, ["venv_lib.sh"], setup + text, env)


@pytest.mark.parametrize(
    ("log", "line"),
    [
        ("Collecting x\n  error: one\n  cause: two\n  cause: three\n", "one; two; three"),
        ("ERROR: no match\nlater\n", "no match"),
        ("progress\n--- the end\n", "the end"),
        ("OSError: [Errno 28] No space left on device\n", "no space left on device"),
    ],
)
def test_why_is_the_installers_cause_in_one_line(
    shell: str, tmp_path: Path, log: str, line: str
) -> None:
    (tmp_path / "log").write_text(log)
    out = lib(shell, tmp_path, "why").out
    assert out.startswith(line) and out.endswith(f"log: {tmp_path}/log)\n")


def test_run_logs_a_command_and_fails_with_its_cause_after_cleanup(
    shell: str, tmp_path: Path
) -> None:
    text = "cleanup() { echo cleaned; }; run echo fine; run sh -c 'echo ERROR: broke; exit 3'"
    done = lib(shell, tmp_path, text)
    assert (done.code, done.out) == (1, "cleaned\n")
    assert done.err == f"podstate: venv build failed: broke (log: {tmp_path}/log)\n"
    assert (tmp_path / "log").read_text() == "fine\nERROR: broke\n"


def test_scrub_forgets_the_pods_installer_settings(shell: str, tmp_path: Path) -> None:
    env = {"PIP_INDEX_URL": "http://x", "UV_INDEX": "y", "VIRTUAL_ENV": "/v", "KEEP": "1"}
    done = lib(shell, tmp_path, "scrub; env | sort", env)
    names = {line.split("=")[0] for line in done.out.splitlines()}
    assert {"PIP_INDEX_URL", "UV_INDEX", "VIRTUAL_ENV"}.isdisjoint(names)
    assert {"KEEP", "PIP_CONFIG_FILE", "PIP_NO_INPUT", "UV_NO_CONFIG"} <= names


def test_start_exports_the_names_and_makes_a_fresh_work_directory(
    shell: str, tmp_path: Path
) -> None:
    old = tmp_path / "tmp" / "podstate-venv.old"
    old.mkdir(parents=True)
    text = (
        f"set -- TMPDIR={tmp_path}/tmp PIP_CACHE_DIR={tmp_path}/c/pip -- --no-index\n"
        'start "$@"; shift "$NAMES"; echo "$NAMES $* $PIP_CACHE_DIR"; echo "$TMPDIR"\n'
        'test "$TMPDIR" = "$work_dir" && test -d "$work_dir" && echo made'
    )
    done = lib(shell, tmp_path, text)
    lines = done.out.splitlines()
    assert lines[0] == f"3 --no-index {tmp_path}/c/pip" and lines[2] == "made"
    assert lines[1].startswith(f"{tmp_path}/tmp/podstate-venv.")
    assert not old.exists() and not Path(lines[1]).exists()  # removed on exit
    assert (tmp_path / "c" / "pip").is_dir()
    log = (tmp_path / "log").read_text()
    assert log.startswith(f"podstate: build of {tmp_path}/v started at ")


# --- uv_install -------------------------------------------------------------------------------


@pytest.fixture
def uv_wheel(tmp_path: Path) -> Path:
    """A wheelhouse with a stand-in for uv's wheel: its bin/uv prints "uv here"."""
    program = tmp_path / "uv-program"
    program.write_text("#!/bin/sh\necho uv here\n")
    (tmp_path / "wheels").mkdir()
    binary_wheel(tmp_path / "wheels", "uv", "0.1", program)
    return tmp_path / "wheels"


def uv_install(shell: str, tmp_path: Path, *index: str) -> Ran:
    """Return what uv_install did for DEST ``tmp_path/opt/uv`` with this machine's python3."""
    python = shutil.which("python3") or "python3"
    text = (
        f"set -- {tmp_path}/opt/uv {python} TMPDIR={tmp_path}/tmp -- {' '.join(index)}\n"
        'uv_install "$@"'
    )
    return sourced(shell, ["venv_lib.sh", "uv_install.sh"], text, {"PODSTATE_UV_PART": "functions"})


def test_uv_install_links_dest_to_the_uv_pip_installed(
    shell: str, tmp_path: Path, uv_wheel: Path
) -> None:
    done = uv_install(shell, tmp_path, "--no-index", "--find-links", str(uv_wheel))
    assert done.code == 0, done.err
    dest = tmp_path / "opt" / "uv"
    assert dest.is_symlink() and str(dest.readlink()) == "uv-env/bin/uv"
    assert (tmp_path / "opt" / "uv-env" / "bin" / "uv").read_text().endswith("echo uv here\n")
    assert not (tmp_path / "opt" / "uv.podstate-new").exists()


def test_uv_install_without_uv_to_install_leaves_no_link(shell: str, tmp_path: Path) -> None:
    done = uv_install(shell, tmp_path, "--no-index")
    assert done.code == 1 and done.err.startswith("podstate: venv uv-install failed: ")
    assert not (tmp_path / "opt" / "uv").is_symlink()
