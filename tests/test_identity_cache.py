"""The container's identity is read from its first process's environment once a container:
the probe keeps what it found on the container disk, keyed by the boot's id, process 1's
start and the names read, and trusts it while that key is this container's only.

Run by dash and bash here, the probe's own lines (``identity_line`` after scripts/work.sh,
which reads process 1's start), with the environment and the cache at paths of the test's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from podstate.facts.boot import ENVIRON, identity_line
from podstate.paths import ID_CACHE
from podstate.shell import script

NAMES = ("VAST_CONTAINERLABEL", "CONTAINER_ID")


def _container() -> str:
    """Return this machine's container key as the probe reads it: BOOT_ID:TICKS of process 1."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{boot}:{Path('/proc/1/stat').read_text().rpartition(') ')[2].split()[19]}"


def identity(shell: str, environ: Path, cache: Path, names: tuple[str, ...] = NAMES) -> str:
    """Return the identity of ``names`` the probe's lines read, run by ``shell``, with the
    environment ``environ`` and the cache ``cache``; they print nothing else."""
    line = identity_line(names).replace(ENVIRON, str(environ)).replace(ID_CACHE, str(cache))
    done = subprocess.run(
        [shell, "-c", f'{script("work.sh")}\n{line}; printf "%s\\n" "$i"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr == "" and done.stdout.endswith("\n")
    return done.stdout[:-1]


@pytest.fixture(params=["dash", "bash"])
def shell(request) -> str:
    return request.param


def test_the_first_read_is_kept_and_later_ones_read_it(shell, tmp_path):
    environ, cache = tmp_path / "environ", tmp_path / "id"
    environ.write_bytes(b"CONTAINER_API_KEY=secret\0VAST_CONTAINERLABEL=C.1\0CONTAINER_ID=1\0")
    assert identity(shell, environ, cache) == "C.1/1"
    key = f"id1 {_container()} {' '.join(NAMES)}"
    assert cache.read_text() == f"{key}\n=C.1/1\n.\n"  # nothing else of the environment
    environ.write_bytes(b"CONTAINER_ID=2\0")  # not read again: the cache answers
    assert identity(shell, environ, cache) == "C.1/1"
    environ.unlink()  # nor when the environment could not be read now
    assert identity(shell, environ, cache) == "C.1/1"


@pytest.mark.parametrize(
    "kept",
    [
        "id1 {other}:{start} {names}\n=C.9/9\n.\n",  # another boot's container (a copied disk)
        "id1 {boot}:1{start} {names}\n=C.9/9\n.\n",  # another container start on this boot
        "id1 {boot}:{start} CONTAINER_ID\n=9\n.\n",  # other names (another provider's)
        "id1 {boot}:{start} {names}\n=C.9/9\n",  # not whole
        "id1 {boot}:{start} {names}\n",
        "",
    ],
)
def test_a_cache_not_this_containers_or_not_whole_is_read_again(shell, tmp_path, kept):
    environ, cache = tmp_path / "environ", tmp_path / "id"
    environ.write_bytes(b"VAST_CONTAINERLABEL=C.1\0CONTAINER_ID=1\0")
    boot, start = _container().split(":")
    other = "00000000-0000-0000-0000-000000000000"
    cache.write_text(kept.format(boot=boot, start=start, other=other, names=" ".join(NAMES)))
    assert identity(shell, environ, cache) == "C.1/1"
    assert cache.read_text() == f"id1 {boot}:{start} {' '.join(NAMES)}\n=C.1/1\n.\n"


def test_an_environment_that_cannot_be_read_is_read_again_next_time(shell, tmp_path):
    environ, cache = tmp_path / "environ", tmp_path / "id"
    assert identity(shell, environ, cache) == ""  # unread: no identity, and nothing kept
    assert not cache.exists()
    environ.write_bytes(b"CONTAINER_ID=7\0")
    assert identity(shell, environ, cache) == "7"


def test_a_container_whose_environment_has_none_keeps_that(shell, tmp_path):
    environ, cache = tmp_path / "environ", tmp_path / "id"
    environ.write_bytes(b"HOME=/root\0")
    assert identity(shell, environ, cache) == ""
    assert cache.read_text().endswith("\n=\n.\n")
    assert identity(shell, environ, cache) == ""
