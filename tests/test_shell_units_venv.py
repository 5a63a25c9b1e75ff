"""The venv's build, restore and switch (scripts/venv.sh), each function run alone under dash,
bash and busybox sh on a temporary directory standing for the pod's filesystem: no pod, no
index.

The script is sourced after venv_lib.sh and venv_missing.sh, as the command sends them,
with PODSTATE_VENV_PART=functions, which defines its functions and runs nothing (set -eu
stays on); a test sets the variables venv_main sets. A venv here is what venv_ok reads:
its record, a dist-info directory per distribution, and a bin/python that starts (a link
to this machine's python3). tests/test_venv.py builds, packs and restores real ones.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from pathlib import Path

from tests.shell_change import Ran, fake_command, sourced

PYTHON = shutil.which("python3") or "/usr/bin/python3"
FINGERPRINT = "f" * 64
VERSION = ".venv-ffffffffffff"


def venv(shell: str, tmp_path: Path, text: str, how: str = "uv") -> Ran:
    """Return what ``text`` did after venv.sh's functions were defined, with venv_main's
    variables set for PATH ``tmp_path/opt/venv`` at VERSION, its log ``tmp_path/log``."""
    opt = tmp_path / "opt"
    setup = (
        f"venv_link={opt}/venv venv_version={VERSION} venv_fingerprint={FINGERPRINT}\n"
        f"venv_record=.podstate-venv venv_python={PYTHON} venv_uv= venv_how={how}\n"
        f"venv_distributions='tinyapp' venv_seed=no venv_compile=0 venv_parent={opt}\n"
        f"venv_base=venv venv_dir={opt}/{VERSION} WHAT=build LOG={tmp_path}/log\n"
        f"work_dir={tmp_path}/work venv_old=\n"
    )
    (tmp_path / "work").mkdir(exist_ok=True)
    names = ["venv_lib.sh", "venv_missing.sh", "venv.sh"]
    return sourced(shell, names, setup + text, {"PODSTATE_VENV_PART": "functions"})


def fake_venv(directory: Path, *distributions: str) -> Path:
    """Return ``directory``, made a venv as venv_ok reads one: of FINGERPRINT, holding
    ``distributions``, whose bin/python starts."""
    site = directory / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    for name in distributions:
        (site / f"{name}-1.0.dist-info").mkdir()
    (directory / "bin").mkdir()
    (directory / "bin" / "python").symlink_to(PYTHON)
    (directory / ".podstate-venv").write_text(f'{{"fingerprint": "{FINGERPRINT}"}}\n')
    return directory


def test_venv_ok_wants_the_record_every_distribution_and_a_python(
    shell: str, tmp_path: Path
) -> None:
    made = fake_venv(tmp_path / "opt" / VERSION, "tinyapp")
    ok = "if venv_ok; then echo 0; else echo 1; fi"
    assert venv(shell, tmp_path, ok).out == "0\n"
    assert venv(shell, tmp_path, "venv_distributions='tinyapp other'; " + ok).out == "1\n"
    (made / ".podstate-venv").write_text('{"fingerprint": "another"}\n')
    assert venv(shell, tmp_path, ok).out == "1\n"


def test_pip_source_is_the_wheel_the_interpreter_seeds_a_venv_with(
    shell: str, tmp_path: Path
) -> None:
    stdlib = tmp_path / "stdlib"
    (stdlib / "ensurepip" / "_bundled").mkdir(parents=True)
    (stdlib / "ensurepip" / "_bundled" / "pip-9.0-py3-none-any.whl").write_text("")
    python = fake_command(tmp_path / "bin", "python", f"{stdlib}\n") / "python"
    done = venv(shell, tmp_path, f"venv_python={python}; pip_source")
    assert done.out == f"{stdlib}/ensurepip/_bundled/pip-9.0-py3-none-any.whl\n"


def test_venv_build_makes_a_venv_with_uv(shell: str, tmp_path: Path) -> None:
    from uv import find_uv_bin

    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "requirements.txt").write_text("")
    text = f"venv_uv={find_uv_bin()}; venv_build --no-index"
    done = venv(shell, tmp_path, text)
    assert done.code == 0, done.err
    assert (tmp_path / "opt" / VERSION / "bin" / "python").exists()


def test_venv_build_failure_names_the_installers_cause(shell: str, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "work" / "requirements.txt").write_text("")
    done = venv(shell, tmp_path, f"venv_uv={tmp_path}/no-uv; venv_build --no-index")
    assert done.code == 1 and done.err.startswith("podstate: venv build failed: ")


def archive(tmp_path: Path, *distributions: str) -> tuple[Path, str]:
    """Return a .tar.gz of a venv as venv_ok reads one, and its sha256."""
    made = fake_venv(tmp_path / "packed", *distributions)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(made.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(made)), recursive=False)
    path = tmp_path / "snap" / "venv-ffffffffffff.tar.gz"
    path.parent.mkdir()
    path.write_bytes(buffer.getvalue())
    (tmp_path / "snap" / "current").write_text("the snapshot's line\n")
    return path, hashlib.sha256(buffer.getvalue()).hexdigest()


def restore(shell: str, tmp_path: Path, path: Path, sha: str) -> Ran:
    """Return what venv_restore did for the archive ``path`` with sha256 ``sha``, in a
    fresh work directory (as start makes one for each run)."""
    shutil.rmtree(tmp_path / "work", ignore_errors=True)
    (tmp_path / "opt").mkdir(exist_ok=True)
    text = (
        f"venv_source={path} venv_sha={sha} venv_current={tmp_path}/snap/current WHAT=restore\n"
        'cleanup() { rm -rf -- "$venv_dir" "$venv_dir.part"; }; venv_restore'
    )
    return venv(shell, tmp_path, text, how="gzip")


def test_venv_restore_unpacks_an_archive_whose_sum_matches(shell: str, tmp_path: Path) -> None:
    path, sha = archive(tmp_path, "tinyapp")
    done = restore(shell, tmp_path, path, sha)
    assert done.code == 0, done.err
    assert (tmp_path / "opt" / VERSION / "bin" / "python").is_symlink()
    assert (
        f"podstate: restored {tmp_path}/opt/{VERSION} from {path}" in (tmp_path / "log").read_text()
    )


def test_a_bad_snapshot_is_set_aside_and_leaves_no_venv(shell: str, tmp_path: Path) -> None:
    path, sha = archive(tmp_path, "other")
    for wanted, why in [
        ("0" * 64, f"its sha256 is {sha}, not {'0' * 64} as {tmp_path}/snap/current records"),
        (sha, "it does not hold a working venv of this fingerprint"),
    ]:
        (tmp_path / "snap" / "current").write_text("line\n")
        done = restore(shell, tmp_path, path, wanted)
        assert (done.code, done.err) == (1, f"podstate: venv snapshot {path} is bad: {why}\n")
        assert (tmp_path / "snap" / "current.bad").exists()
        assert sorted(p.name for p in (tmp_path / "opt").iterdir()) == []


def test_venv_verify_names_a_distribution_the_venv_lacks(shell: str, tmp_path: Path) -> None:
    fake_venv(tmp_path / "opt" / VERSION, "tinyapp")
    assert venv(shell, tmp_path, "venv_verify").code == 0
    done = venv(shell, tmp_path, "venv_distributions='tinyapp gone'; venv_verify")
    assert (done.code, done.err) == (
        1,
        "podstate: venv build failed: requested but not installed: gone\n",
    )


def test_venv_switch_writes_the_record_and_moves_the_link(shell: str, tmp_path: Path) -> None:
    opt = tmp_path / "opt"
    (opt / VERSION).mkdir(parents=True)
    (opt / "venv").symlink_to(".venv-000000000000")
    done = venv(shell, tmp_path, 'venv_data=cmVjb3JkCg==; venv_switch; echo "$venv_old"')
    assert done.out == ".venv-000000000000\n"
    assert str((opt / "venv").readlink()) == VERSION
    assert (opt / VERSION / ".podstate-venv").read_text() == "record\n"
    assert sorted(p.name for p in opt.iterdir()) == [VERSION, "venv"]


def test_venv_prune_keeps_the_new_and_the_previous_version(shell: str, tmp_path: Path) -> None:
    opt = tmp_path / "opt"
    names = [VERSION, ".venv-000000000000", ".venv-111111111111.part", ".venv-222222222222-2"]
    for name in [*names, ".venv-notaversion", "mine"]:
        (opt / name).mkdir(parents=True)
    venv(shell, tmp_path, "venv_old=.venv-000000000000; venv_prune")
    kept = sorted(p.name for p in opt.iterdir())
    assert kept == sorted([VERSION, ".venv-000000000000", ".venv-notaversion", "mine"])
