"""Root filesystems for sandbox pods: the host's own, or a Debian release built once.

A pod's root is an overlay whose lower layer is its image: the host's ``/`` (``HOST``, the
default) or a Debian release that ``build`` makes with ``debootstrap --variant=minbase``
from Debian's archive and keeps in ``CACHE``, one directory per release and package list,
for every sandbox on the machine (so a test suite builds it once per machine, not once per
run). ``bullseye`` stands for the older pod images (bash 5.1, coreutils 8.32, OpenSSH 8.4,
git 2.30, Python 3.9: close to Ubuntu 22.04's).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from podstate.procfs import unescape
from podstate.sandbox.state import SandboxError

HOST = "host"  # the host's own /
# Debian releases an image can be: their archive's suite names.
RELEASES = ("bullseye", "trixie")
MIRROR = "http://deb.debian.org/debian"
# Machine-wide, so that every sandbox and every test session shares one build.
CACHE = Path("/var/cache/podstate-sandbox/images")
# What a pod needs besides minbase (which has dash, coreutils, tar, gzip, sed, grep, mawk,
# findutils, util-linux's unshare, setpriv and flock, hostname): RunPod's start script's sshd
# and its SFTP server, sshfs for the volume, git (repos), Python (the Jupyter stand-in, the
# venv role), procps (ps, pkill: the tests), ca-certificates and zstd (venv snapshots).
PACKAGES = (
    "openssh-server", "openssh-sftp-server", "sshfs", "git", "python3", "procps",
    "ca-certificates", "zstd",
)  # fmt: skip
BUILD_TIMEOUT_S = 1200


def names() -> tuple[str, ...]:
    """Return every image name ``up --image`` takes, the default first."""
    return (HOST, *RELEASES)


def root_of(name: str, cache: Path = CACHE) -> Path:
    """Return the root filesystem of image ``name``: ``/`` for the host's, else its cached
    build, made first if there is none (``build``)."""
    if name == HOST:
        return Path("/")
    return build(name, cache)


def build(name: str, cache: Path = CACHE) -> Path:
    """Return the cached root filesystem of the Debian release ``name``, built first where
    there is none; raises SandboxError (one line) for an unknown name, a missing
    debootstrap or a failed build.

    Built at most once at a time per machine (a lock file beside it: a second caller waits
    and then finds it), beside its final place and renamed there once complete, so a build
    cut short is never taken for an image; what such a build left is removed by the next.
    """
    if name not in RELEASES:
        known = ", ".join(names())
        raise SandboxError(f"unknown sandbox image {name!r}; known: {known}")
    target = cache / f"{name}-{_digest()}"
    if target.is_dir():
        return target
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            f"building the {name} image needs debootstrap (apt-get install debootstrap)"
        )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.is_dir():
                _debootstrap(name, target)
    except OSError as error:
        raise SandboxError(f"cannot build the {name} image in {cache}: {error}") from error
    return target


def _digest() -> str:
    """Return a short digest of what makes an image (its packages and mirror), so that a
    changed list builds a new one instead of using a stale one."""
    return hashlib.sha256(" ".join((MIRROR, *PACKAGES)).encode()).hexdigest()[:10]


def _debootstrap(name: str, target: Path) -> None:
    """Build release ``name`` into a directory beside ``target`` and rename it there."""
    for stale in target.parent.glob(f".{target.name}.*"):
        _remove(stale)
    work = target.parent / f".{target.name}.{os.getpid()}"
    log = target.parent / f"{name}.log"
    started = time.monotonic()
    command = [
        "debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
        name, str(work), MIRROR,
    ]  # fmt: skip
    try:
        with open(log, "w") as out:
            done = subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S
            )
    except subprocess.TimeoutExpired:
        _remove(work)
        raise SandboxError(
            f"building the {name} image took over {BUILD_TIMEOUT_S} s; see {log}"
        ) from None
    if done.returncode != 0:
        _remove(work)
        lines = log.read_text(errors="replace").strip().splitlines() or ["no output"]
        raise SandboxError(f"building the {name} image failed: {lines[-1]} (see {log})")
    # No host keys, as RunPod's images have none; no package files kept.
    for key in (work / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    for deb in (work / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    work.rename(target)
    with open(log, "a") as out:
        out.write(f"built in {time.monotonic() - started:.0f} s\n")


def _remove(path: Path) -> None:
    """Remove a build directory, unmounting first what a cut-short debootstrap left mounted
    in it (/proc, /sys)."""
    prefix = str(path) + "/"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = unescape(line.split()[4])
        if point.startswith(prefix):
            subprocess.run(["umount", "-l", point], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Build each image ``argv`` names, as ``.ci/run`` does before the tests
    (``python -m podstate.sandbox.images bullseye``); return 0, or 1 with the one-line error."""
    for name in argv:
        try:
            print(f"{name}: {root_of(name)}")
        except SandboxError as error:
            print(f"podstate: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
