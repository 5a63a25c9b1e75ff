"""Restart benchmark: how long a restarted pod waits for ``podstate watch`` to put it back.

On fresh sandbox pods behind the latency proxy (bench/common/latency_proxy.py), listed by a RunPod
API that this module serves (the sandbox API's documents, their SSH ports those of the
proxy, the API itself behind the proxy too), one run:

* converges every pod (``pyinfra -y inventories/pods.py deploy/pod.py``, the API inventory);
* times the reference: a quarter of the pods restarted (``container.restart``), then the apply
  a watch pass runs for them (``pyinfra -y --json --limit POD ... inventories/pods.py
  deploy/pod.py``), once before the watch starts and once after it stopped;
* starts ``podstate watch --json`` with its defaults (every deploy file, ``--interval`` 30 s)
  and, in each cycle, restarts another quarter of the pods together, at evenly spread points
  of the watch's interval: their SSH is up again ``lead`` seconds before the watch's next
  listing, in cycle k of n (from 0) ``(n - k) / n`` of an interval less ``MARGIN_S``; the
  first cycle is the worst case, a restart just after a listing;
* for each restarted pod, from its SSH being up again (``container.restart`` returned: its new
  sshd answers) to its being ready: ``podstate-ready`` exits 0 on the pod, polled there
  every 0.2 s through one SSH session opened at once (the pod's own clock, which is this
  machine's, says when).

The floor is the watch's interval plus one reference apply: a pod restarted just after a
listing waits a whole interval, then the apply. ``--report`` rebuilds restart.md from
restart.json alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from bench.common.cli import need_root, results_options
from bench.common.steps import BenchError
from bench.restart.report import fmt, report, summary
from bench.restart.run import QUARTERS, measure


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or only rebuild the report); return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.restart", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pods", type=int, default=24, help="pods (default 24)")
    parser.add_argument("--rtt", type=float, default=150.0, help="round-trip ms (default 150)")
    parser.add_argument("--cycles", type=int, default=4, help="restart cycles (default 4)")
    results_options(parser, "only rebuild restart.md")
    args = parser.parse_args(argv)
    try:
        if args.report:
            raw = json.loads((args.out / "restart.json").read_text())
        else:
            need_root()
            if args.pods < QUARTERS or args.cycles < 1 or args.rtt < 0:
                raise BenchError(f"--pods must be at least {QUARTERS}, --cycles 1, --rtt >= 0")
            raw = measure(args.pods, args.rtt, args.cycles, args.out)
        (args.out / "restart.md").write_text(report(raw))
    except (BenchError, OSError, subprocess.SubprocessError, ValueError) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    s = summary(raw)
    print(f"ready again after median {fmt(s['median_s'])} s, max {fmt(s['max_s'])} s "
          f"(floor {fmt(s['floor_s'])} s); wrote {args.out / 'restart.md'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
