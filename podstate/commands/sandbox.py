"""``podstate sandbox ACTION``: local sandbox pods (``podstate.sandbox``), loaded by no other
command."""

from __future__ import annotations

import argparse
import shlex
import sys

from podstate.sandbox import api, container, lifecycle
from podstate.sandbox.state import SandboxError, state_dir


def sandbox(args: argparse.Namespace) -> int:
    """Run ``podstate sandbox ACTION``; return 0, or 1 with the sandbox's one-line error."""
    try:
        if (args.pod is None) == (args.action == "restart"):
            which = (
                "name the pod to restart: podstate sandbox restart POD"
                if args.pod is None
                else f"only restart takes a pod name, not {args.pod!r}"
            )
            raise SandboxError(f"podstate sandbox {args.action}: {which}")
        if args.action == "up":
            pods_file = lifecycle.up(
                pods=args.pods,
                nvidia_smi_delay=args.nvidia_smi_delay,
                vast=args.vast,
                image=args.image,
            )
            vast = f" and {args.vast} Vast instances" if args.vast else ""
            image = f" on the {args.image} image" if args.image != "host" else ""
            print(f"{args.pods} sandbox pods{vast} are up{image}; pods file: {pods_file}")
            print(
                f"converge them: PODSTATE_PODS={pods_file} "
                "pyinfra -y inventories/pods.py deploy/*.py"
            )
            print(
                'or through their RunPod API: eval "$(podstate sandbox api)"; '
                "pyinfra -y inventories/pods.py deploy/*.py"
            )
        elif args.action == "restart":
            print(f"{args.pod} restarted: {container.restart(args.pod)}")
        elif args.action == "api":
            _api()
        elif args.action == "down":
            lifecycle.down()
            print("sandbox pods are down")
        else:
            pods = lifecycle.status()
            if not pods:
                print("no sandbox pods")
            for pod in pods:
                state = "running" if pod.running else "stopped"
                print(f"{pod.name:10} 127.0.0.1:{pod.port:<6} {state:8} {pod.shape}")
    except SandboxError as e:
        print(f"podstate: {e}", file=sys.stderr)
        return 1
    return 0


def _api() -> None:
    """Print the shell lines that point podstate at the sandbox's provider APIs; return
    nothing (SandboxError when the sandbox is not up)."""
    env = api.api_env()
    key_file = state_dir() / api.API_KEY_FILE
    print("unset PODSTATE_PODS")
    print(f"export RUNPOD_API_URL={shlex.quote(env['RUNPOD_API_URL'])}")
    print(f'export RUNPOD_API_KEY="$(cat {shlex.quote(str(key_file))})"')
    for name in ("PODSTATE_SSH_KEY", "PODSTATE_HOSTKEYS"):
        print(f"export {name}={shlex.quote(env[name])}")
    if "VAST_API_URL" in env:
        vast_key = state_dir() / "vast_api_key"
        print(f"export VAST_API_URL={shlex.quote(env['VAST_API_URL'])}")
        print(f'export VAST_API_KEY="$(cat {shlex.quote(str(vast_key))})"')
