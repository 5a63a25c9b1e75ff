"""Read benchmark: a directory of large files read from the network volume and from local disk.

Model weights are a few large files read from start to end (safetensors shards loaded by
mmap, checkpoints by read()). This times exactly that on a sandbox pod whose network
volume (/workspace, sshfs) sits behind the latency proxy (bench/latency_proxy.py, default
10 ms round trip), against the same files on local disk:

* ``--files`` files of ``--size`` each (default 4 x 512M) of random bytes are written on the
  control machine, once into a directory the pod sees through its root overlay's lower
  layer (its local disk: the control machine's own filesystem, as a RunPod container disk
  is an overlay on the host's local disk), once into the pod's network volume storage;
* each pass reads every file once, from a Python process on the pod, two ways: ``read``
  (4 MiB read() calls, as a checkpoint loader does) and ``mmap`` (one touch per page, in
  order, as safetensors' mmap loading does);
* before every pass the page cache is dropped on the machine (``sync``, then
  ``echo 3 > /proc/sys/vm/drop_caches``: the pods share its kernel, so this empties the
  sshfs client's cache, the storage server's and the local disk's alike), and ``fincore``
  checks that no page of the files is still cached; the JSON records what it found.

Run as root: ``make bench-read`` or ``python -m bench.read [--files 4 --size 512M]``.
Writes bench/results/read.md and read.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import latency_proxy
from bench.machine import machine
from podstate.jsonfile import write_json
from podstate.sandbox import lifecycle, ssh
from podstate.sizes import format_size, parse_size

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
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


def _mib_s(seconds: float, total: int) -> str:
    return f"{total / seconds / 2**20:.0f} MiB/s"


def report(results: dict[str, Any]) -> str:
    """Return the Markdown report of a run: the table, the ratio, how it was measured."""
    total = results["files"] * results["size"]
    medians = {key: statistics.median(runs) for key, runs in results["passes"].items()}
    lines = [
        "# Read benchmark: large files from the network volume and from local disk",
        "",
        f"{results['files']} files of {format_size(results['size'])} "
        f"({format_size(total)} in all) of random bytes, each read once from start to end by "
        f"one process on a sandbox pod; medians of {results['repeat']} passes, the page cache "
        f"dropped before each. Network volume: sshfs behind a {results['rtt_ms']:g} ms "
        "round-trip link (the sandbox's stand-in for a RunPod network volume). Local disk: "
        f"files under the pod's root overlay, on the machine's own disk ({results['local_fs']}). "
        f"Machine: {results['machine']['cores']} cores, {results['machine']['cpu']}, "
        f"{results['machine']['memory_gib']} GiB. Run {results['date']} with "
        f"`{results['command']}`.",
        "",
        "| source | read(), 4 MiB calls | mmap, page by page |",
        "|---|---|---|",
    ]
    network = f"network volume (sshfs, {results['rtt_ms']:g} ms)"
    for where, name in (("network", network), ("local", "local disk")):
        cells = [
            f"{medians[f'{where}/{p}']:.2f} s ({_mib_s(medians[f'{where}/{p}'], total)})"
            for p in PATTERNS
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    ratios = [medians[f"network/{p}"] / medians[f"local/{p}"] for p in PATTERNS]
    lines.append(f"| **network / local** | **{ratios[0]:.1f}x** | **{ratios[1]:.1f}x** |")
    cached = max(results["cached_before_pass"])
    lines += [
        "",
        "Every pass: `sync`, `echo 3 > /proc/sys/vm/drop_caches` on the machine (the pod",
        "shares its kernel, so this empties the sshfs client's page cache, the storage",
        "server's and the local disk's), then `fincore` on the files: "
        + (
            "no page of them was cached before any pass."
            if cached == 0
            else f"at most {format_size(cached)} of them was still cached before a pass."
        ),
        "Network and local passes alternate in order, so neither always runs first.",
        "",
        "What it says and what it does not: the sandbox's volume is one sshfs connection, whose",
        "throughput over a round trip of this length is what the table shows, for read() and",
        "mmap alike. RunPod's network volumes are MooseFS, not sshfs, and are not measured",
        "here. The local disk is this machine's own disk, which on a virtual machine may be",
        "served from a cache below it: the fast end of what a container disk does.",
        "",
        "All passes (seconds): "
        + "; ".join(
            f"{key} " + ", ".join(f"{s:.2f}" for s in runs)
            for key, runs in results["passes"].items()
        )
        + ".",
    ]
    if results.get("note"):
        lines += ["", results["note"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write bench/results/read.md and read.json; return the exit status."""
    parser = argparse.ArgumentParser(prog="bench.read", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=4, help="how many files (default 4)")
    parser.add_argument("--size", default="512M", help="size of each file (default 512M)")
    parser.add_argument("--rtt-ms", type=float, default=10.0, help="network volume round trip")
    parser.add_argument("--repeat", type=int, default=3, help="passes of each kind (medians)")
    parser.add_argument("--note", help="a line to add to the report (why sizes differ, say)")
    parser.add_argument("--report", action="store_true", help="rewrite the report from JSON")
    args = parser.parse_args(argv)
    raw = RESULTS / "read.json"
    if args.report:
        results = json.loads(raw.read_text())
    else:
        if os.geteuid() != 0:
            print("bench.read: sandbox pods and dropping the page cache need root", file=sys.stderr)
            return 2
        try:
            size = parse_size(args.size)
        except ValueError as error:
            parser.error(f"--size: {error}")
        if args.files < 1 or size < 4096:
            parser.error("need at least one file of at least 4K")
        results = run(args.files, size, args.rtt_ms, args.repeat)
        results["machine"] = machine()
        results["date"] = time.strftime("%Y-%m-%d")
        results["command"] = (
            f"python -m bench.read --files {args.files} --size {args.size} "
            f"--repeat {args.repeat} --rtt-ms {args.rtt_ms:g}"
        )
        if args.note:
            results["note"] = args.note
        write_json(raw, results, indent=1)
    (RESULTS / "read.md").write_text(report(results))
    print((RESULTS / "read.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
