"""The ``podstate`` command: what pyinfra's own CLI does not cover."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from podstate import check, sandbox, settings, signals
from podstate.spec import SpecError


def _sandbox(args: argparse.Namespace) -> int:
    if args.action == "up":
        pods_file = sandbox.up(pods=args.pods)
        print(f"{args.pods} sandbox pods are up; pods file: {pods_file}")
        print(
            f"converge them: PODSTATE_PODS={pods_file} pyinfra -y inventories/pods.py deploy/pod.py"
        )
    elif args.action == "down":
        sandbox.down()
        print("sandbox pods are down")
    else:
        pods = sandbox.status()
        if not pods:
            print("no sandbox pods")
        for pod in pods:
            state = "running" if pod.running else "stopped"
            print(f"{pod.name:10} 127.0.0.1:{pod.port:<6} {state:8} {pod.shape}")
    return 0


def _check(args: argparse.Namespace) -> int:
    try:
        results = check.run(args.inventory, args.deploy, args.limit or [], timeout=args.timeout)
    except (check.CheckFailed, SpecError) as e:
        print(f"podstate: {e}", file=sys.stderr)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(check.as_json(results), indent=2) + "\n")
    if args.junit:
        Path(args.junit).write_text(check.junit(results))
    sys.stdout.write(check.table(results, diff=args.diff))
    return check.exit_code(results)


def parser() -> argparse.ArgumentParser:
    """Return the argument parser for every subcommand."""
    top = argparse.ArgumentParser(prog="podstate", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    box = commands.add_parser("sandbox", help="local sandbox pods: real sshd, RunPod-shaped")
    box.add_argument("action", choices=["up", "down", "status"])
    box.add_argument("--pods", type=int, default=4, help="how many pods (up; default 4)")
    box.set_defaults(run=_sandbox)
    drift = commands.add_parser(
        "check",
        help="report drift without changing any pod (exit 0 ok, 2 drift, 1 worse)",
    )
    drift.add_argument("--inventory", default="inventories/pods.py")
    drift.add_argument("--deploy", default="deploy/pod.py")
    drift.add_argument("--limit", action="append", help="pod name, group or glob (repeatable)")
    drift.add_argument("--json", metavar="PATH", help="write the JSON report here")
    drift.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here")
    drift.add_argument("--diff", action="store_true", help="show unified diffs of managed files")
    drift.add_argument(
        "--timeout", type=int, default=settings.CONNECT_TIMEOUT, help="SSH connect timeout, seconds"
    )
    drift.set_defaults(run=_check)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; errors are one line on stderr and exit status 1."""
    args = parser().parse_args(argv)
    signals.install()
    try:
        return args.run(args)
    except sandbox.SandboxError as e:
        print(f"podstate: {e}", file=sys.stderr)
        return 1
