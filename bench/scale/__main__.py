"""Scale: converge and check N sandbox pods from one control process, and where the time goes.

Run with ``make bench-scale`` (root). Writes bench/results/scale.md and scale.json: for each
pod count, ``pyinfra -y inventories/pods.py deploy/pod.py`` (a first apply, then no-op
applies) and ``podstate check``, medians of ``--runs``: wall time, the control process's
peak memory and CPU, the pods' CPU (their cgroups: sshd and every process of the pod) and
the whole machine's, each per pod, plus the least-squares slope of peak memory per pod; and
for the largest count, the check split into each of ``--shards`` (``podstate check --shard
K/N``, N processes started at once, as N CI runners would run them).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench.common.cli import RESULTS
from bench.scale.measure import run_count
from bench.scale.report import report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--pods", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument(
        "--shards",
        type=int,
        nargs="*",
        default=[2, 4],
        help="check the largest count as N shards at once, for each N given",
    )
    parser.add_argument("--runs", type=int, default=3, help="no-op applies and checks a count")
    parser.add_argument(
        "--base-port",
        type=int,
        default=10000,
        help="first sandbox port: below the range other sandboxes default to, since 500 pods "
        "span more ports than lie between two of their bases",
    )
    parser.add_argument(
        "--report", action="store_true", help="rebuild scale.md from scale.json only"
    )
    args = parser.parse_args()
    if args.report:
        saved = json.loads((RESULTS / "scale.json").read_text())
        text = report({int(pods): runs for pods, runs in saved.items()})
        (RESULTS / "scale.md").write_text(text)
        print(text)
        return 0
    results = {}
    with tempfile.TemporaryDirectory(prefix="podstate-scale-") as work:
        for pods in args.pods:
            print(f"scale: {pods} pods", file=sys.stderr)
            shards = tuple(args.shards) if pods == max(args.pods) else ()
            results[pods] = run_count(pods, Path(work), shards, args.runs, args.base_port)
            RESULTS.mkdir(parents=True, exist_ok=True)  # each count kept as soon as it is done
            (RESULTS / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
            (RESULTS / "scale.md").write_text(report(results))
    print(report(results))
    return 0 if all(m["exit"] == 0 for r in results.values() for m in r.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
