"""Read benchmark: a directory of large files read from the network volume and from local disk.

Model weights are a few large files read from start to end (safetensors shards loaded by
mmap, checkpoints by read()). This times exactly that on a sandbox pod whose network
volume (/workspace, sshfs) sits behind the latency proxy (bench/common/latency_proxy.py, default
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
import sys
import time

from bench.common.cli import RESULTS
from bench.common.machine import machine
from bench.read.measure import run
from bench.read.report import report
from podstate.jsonfile import write_json
from podstate.sizes import parse_size


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
