"""The read benchmark's passes: files written once, a sandbox pod whose volume is behind the
latency proxy, and each file read from the volume and from local disk, the page cache
dropped before every pass.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import latency_proxy
from podstate.sandbox import lifecycle, ssh

POD = "pod-1"  # /workspace on sshfs
# Local files live under the control machine's /var/tmp: part of every pod's root overlay
# (its lower layer), on the machine's disk, and not hidden like /tmp and /root are.
LOCAL_PARENT = Path("/var/tmp")
PATTERNS = ("read", "mmap")
CHUNK = 4 << 20
READER = """
import mmap, sys, time
pattern, paths = sys.argv[1], sys.argv[2:]
total, start = 0, time.perf_counter()
for path in paths:
    with open(path, "rb", buffering=0) as f:
        if pattern == "read":
            buf = bytearray(4 << 20)
            while n := f.readinto(buf):
                total += n
        else:
            with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
                for i in range(0, len(m), 4096):
                    m[i]
                total += len(m)
print(time.perf_counter() - start, total)
"""


def write_files(directory: Path, files: int, size: int) -> list[Path]:
    """Return ``files`` new files of ``size`` random bytes each, written under ``directory``.

    Random bytes, so that nothing on the way (ssh compression, a deduplicating store) can
    make them cheaper to move than model weights are.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(files):
        path = directory / f"shard-{number:05d}.bin"
        with open(path, "wb") as out:
            left = size
            while left:
                block = os.urandom(min(CHUNK, left))
                out.write(block)
                left -= len(block)
        paths.append(path)
    return paths


def drop_caches(host_paths: list[Path]) -> int:
    """Empty the machine's page cache; return how many bytes of ``host_paths`` stay cached.

    Zero is the expected answer: every pass then starts from the disks, not from memory.
    """
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    shown = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, host_paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    return sum(int(line) for line in shown.stdout.split())


def read_pass(pod_paths: list[str], pattern: str, expected: int) -> float:
    """Return the seconds one process on the pod takes to read every file in ``pod_paths``.

    Timed inside the pod, so ssh's own connection set-up is not part of it; a pass that
    reads other than ``expected`` bytes in all is an error.
    """
    command = f"python3 -c {shlex.quote(READER)} {pattern} " + " ".join(map(shlex.quote, pod_paths))
    result = ssh.ssh(POD, command, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"{POD}: reading failed: {result.stderr.strip()[-500:]}")
    seconds, total = result.stdout.split()
    if int(total) != expected:
        raise RuntimeError(f"{POD}: read {total} bytes, not {expected}")
    return float(seconds)


def run(files: int, size: int, rtt_ms: float, repeat: int) -> dict[str, Any]:
    """Write the files, start the pod, time every pass; return the raw results."""
    results: dict[str, Any] = {
        "files": files,
        "size": size,
        "rtt_ms": rtt_ms,
        "repeat": repeat,
        "passes": {f"{where}/{p}": [] for where in ("network", "local") for p in PATTERNS},
        "cached_before_pass": [],
    }
    local = Path(tempfile.mkdtemp(prefix="podstate-bench-read-", dir=LOCAL_PARENT))
    try:
        local_paths = write_files(local, files, size)
        results["local_fs"] = _fs_type(local)
        with (
            latency_proxy.routes(rtt_ms) as route,
            tempfile.TemporaryDirectory(prefix="podstate-bench-read-") as tmp,
        ):
            state = Path(tmp) / "sandbox"
            os.environ["PODSTATE_SANDBOX"] = str(state)
            try:
                lifecycle.up(pods=1, storage_route=route)
                volume = state / "storage" / POD / "read-bench"
                volume.mkdir()
                volume_paths = [volume / path.name for path in local_paths]
                for source, target in zip(local_paths, volume_paths, strict=True):
                    shutil.copyfile(source, target)
                results["volume_fs"] = _fs_type(volume)
                pod_paths = {
                    "network": [f"/workspace/read-bench/{p.name}" for p in volume_paths],
                    "local": [str(p) for p in local_paths],
                }
                for turn in range(repeat):
                    for pattern in PATTERNS:
                        for where in (
                            ("network", "local") if turn % 2 == 0 else ("local", "network")
                        ):
                            cached = drop_caches(local_paths + volume_paths)
                            results["cached_before_pass"].append(cached)
                            seconds = read_pass(pod_paths[where], pattern, files * size)
                            results["passes"][f"{where}/{pattern}"].append(seconds)
                            print(f"{where} {pattern}: {seconds:.2f} s", file=sys.stderr)
            finally:
                lifecycle.down()
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return results


def _fs_type(path: Path) -> str:
    """Return the filesystem type of ``path`` and the device behind it, as findmnt says."""
    shown = subprocess.run(
        ["findmnt", "--noheadings", "--output", "FSTYPE,SOURCE", "--target", str(path)],
        capture_output=True,
        text=True,
    )
    return " ".join(shown.stdout.split()) or "unknown"
