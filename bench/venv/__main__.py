"""Venv benchmark: time to a ready venv of numpy + pandas on sandbox pods, several ways.

On fresh sandbox pods whose network volume (/workspace, sshfs) is reached through the
latency proxy (bench/common/latency_proxy.py, default 10 ms round trip), with the same local
wheelhouse (numpy 2.1.3, pandas 2.2.3 and their dependencies, cp311 manylinux x86_64,
fetched once with ``pip download``) copied onto each pod's local disk:

1. ``naive``: ``python3 -m venv /workspace/venv`` and ``pip install`` there, with the
   pod's own environment (RunPod's ``PIP_CACHE_DIR=/workspace/.cache/pip``, default
   TMPDIR), on an sshfs pod; capped by ``--naive-timeout``;
2. ``role``: ``pyinfra`` applying a ``venv:`` section to a fresh pod (no uv, empty caches);
3. ``restore``: the same after wiping the pod's container disk, with ``venv.snapshot`` on
   the network volume: the role unpacks the snapshot instead of installing;
4. ``floor``: ``uv pip install`` by hand into local disk with a warm local cache, and
   with an empty one (``cold_s``), doing what the role does (pip seeded from the
   interpreter's wheel, bytecode compiled); and unpacking the snapshot archive by hand
   from the volume (``unpack_s``);
5. ``remote``: packages from a remote index instead: the same wheels served over HTTP
   (find-links) through the latency proxy at ``--index-rtt-ms`` (50) and ``--index-mbs``
   (50 MB/s); a build on a wiped pod against a restore from the snapshot.

The targets are ratios to floors measured in the same run: a fresh pod's whole apply
<= 1.3 x (an apply that changes nothing + ``uv pip install`` by hand with an empty cache);
a restore's whole apply <= 1.3 x (an apply that changes nothing + unpacking the archive by
hand); naive / role >= 100 x. For 2 and 3 the table gives the whole ``pyinfra`` run
(connect, probe, uv upload, build) and the venv operation alone (from its log's
timestamps). Then ``import pandas`` is timed from each venv, first and again.

Run as root: ``make bench-venv`` or ``python -m bench.venv [--rtt-ms 10]``. Writes
bench/results/venv.md and venv.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from bench.common.cli import RESULTS
from bench.venv.cases import run
from bench.venv.pods import WHEELS, wheelhouse
from bench.venv.report import report


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write bench/results/venv.md; returns the exit status."""
    parser = argparse.ArgumentParser(prog="bench.venv", description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=10.0, help="network volume round trip")
    parser.add_argument("--naive-timeout", type=int, default=1200, help="cap on case 1, in seconds")
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="wheelhouse directory")
    parser.add_argument("--repeat", type=int, default=3, help="runs of cases 2-5 (medians)")
    parser.add_argument("--index-rtt-ms", type=float, default=50.0, help="remote index round trip")
    parser.add_argument("--index-mbs", type=float, default=50.0, help="remote index MB/s")
    parser.add_argument("--no-remote", action="store_true", help="skip case 5")
    parser.add_argument("--note", default="", help="a line for the report (what was reduced)")
    parser.add_argument("--report", action="store_true", help="rewrite the report from JSON")
    parser.add_argument(
        "--reuse-naive",
        action="store_true",
        help="keep case 1 (about 20 minutes) from the last JSON and rerun cases 2-4 only",
    )
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw = RESULTS / "venv.json"
    if args.report:
        results = json.loads(raw.read_text())
    else:
        if os.geteuid() != 0:
            print("bench.venv: sandbox pods need root", file=sys.stderr)
            return 2
        previous = json.loads(raw.read_text()) if args.reuse_naive and raw.exists() else {}
        timeout = 0 if "naive" in previous else args.naive_timeout
        index = None if args.no_remote else (args.index_rtt_ms, args.index_mbs)
        results = run(args.rtt_ms, timeout, wheelhouse(args.wheels), args.repeat, index)
        if args.note:
            results["note"] = args.note
        if "naive" in previous:
            results["naive"] = previous["naive"]
            results["naive_date"] = previous.get("naive_date") or previous.get("date")
        results["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs"
        results["date"] = time.strftime("%Y-%m-%d")
        raw.write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "venv.md").write_text(report(results))
    print((RESULTS / "venv.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
