"""The ``podstate`` command: what pyinfra's own CLI does not cover."""

from __future__ import annotations

import argparse
import sys

from podstate import sandbox


def _sandbox(args: argparse.Namespace) -> int:
    if args.action == "up":
        pods_file = sandbox.up(pods=args.pods)
        print(f"{args.pods} sandbox pods are up; pods file: {pods_file}")
        print(f"converge them: PODSTATE_PODS={pods_file} pyinfra -y inventories/pods.py "
              "deploy/pod.py")
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


def parser() -> argparse.ArgumentParser:
    """Return the argument parser for every subcommand."""
    top = argparse.ArgumentParser(prog="podstate", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    box = commands.add_parser("sandbox", help="local sandbox pods: real sshd, RunPod-shaped")
    box.add_argument("action", choices=["up", "down", "status"])
    box.add_argument("--pods", type=int, default=4, help="how many pods (up; default 4)")
    box.set_defaults(run=_sandbox)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; errors are one line on stderr and exit status 1."""
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except sandbox.SandboxError as e:
        print(f"podstate: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("podstate: interrupted", file=sys.stderr)
        return 130
