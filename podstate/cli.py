"""The podstate command: what pyinfra's own CLI does not cover."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from podstate import settings, signals
from podstate.check import markdown as report_markdown
from podstate.check import merge, reports, result, runner, shards
from podstate.check.result import PodResult
from podstate.desired.errors import SpecError
from podstate.pyinfra_api.verify import Unsupported, verify
from podstate.watch import loop as watch


def _sandbox(args: argparse.Namespace) -> int:
    """Run ``podstate sandbox ACTION``; return 0, or 1 with the sandbox's one-line error.

    The sandbox is imported here, not at start-up: no other command needs it.
    """
    from podstate.sandbox import api, container, lifecycle
    from podstate.sandbox.state import SandboxError, state_dir

    try:
        if (args.pod is None) == (args.action == "restart"):
            which = (
                "name the pod to restart: podstate sandbox restart POD"
                if args.pod is None
                else f"only restart takes a pod name, not {args.pod!r}"
            )
            raise SandboxError(f"podstate sandbox {args.action}: {which}")
        if args.action == "up":
            pods_file = lifecycle.up(pods=args.pods, nvidia_smi_delay=args.nvidia_smi_delay)
            print(f"{args.pods} sandbox pods are up; pods file: {pods_file}")
            print(
                f"converge them: PODSTATE_PODS={pods_file} "
                "pyinfra -y inventories/pods.py deploy/*.py"
            )
            print(
                'or through their RunPod API: eval "$(podstate sandbox api)"; '
                "pyinfra -y inventories/pods.py deploy/*.py"
            )
        elif args.action == "restart":
            container.restart(args.pod)
            print(f"{args.pod} restarted: container disk wiped, /workspace kept, start script run")
        elif args.action == "api":
            env = api.api_env()
            key_file = state_dir() / api.API_KEY_FILE
            print("unset PODSTATE_PODS")
            print(f"export RUNPOD_API_URL={shlex.quote(env['RUNPOD_API_URL'])}")
            print(f'export RUNPOD_API_KEY="$(cat {shlex.quote(str(key_file))})"')
            for name in ("PODSTATE_SSH_KEY", "PODSTATE_HOSTKEYS"):
                print(f"export {name}={shlex.quote(env[name])}")
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


def _wait(args: argparse.Namespace) -> int:
    """Wait until every selected pod is ready for the current desired state."""
    from podstate.check import wait

    deploys = args.deploy or runner.deploy_files()
    return wait.run(args.inventory, deploys, args.limit or [], args.timeout, args.interval)


def _write(path: str, text: str) -> None:
    """Write a report; a path that cannot be written is CheckFailed, one line."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise runner.CheckFailed(f"cannot write the report {path}: {e.strerror or e}") from None


def _check(args: argparse.Namespace) -> int:
    """Run the drift check, write the reports asked for; return the check's exit status."""
    deploys = args.deploy or runner.deploy_files()
    shard = shards.parse(args.shard) if args.shard else None
    results = runner.run(
        args.inventory,
        deploys,
        args.limit or [],
        timeout=args.timeout,
        shard=shard,
        strict_host_keys=True if args.strict_host_keys else None,  # else as the environment says
    )
    return _write_reports(results, args)


def _write_reports(results: dict[str, PodResult], args: argparse.Namespace) -> int:
    """Print the table, write the reports ``args`` asks for; return the fleet's exit status."""
    sys.stdout.write(reports.table(results, diff=args.diff))
    sys.stdout.flush()
    if args.json:
        _write(args.json, json.dumps(result.to_json(results), indent=2) + "\n")
    if args.junit:
        _write(args.junit, reports.junit(results))
    if args.markdown:
        _write(args.markdown, report_markdown.markdown(results))
    return result.exit_code(results)


def _merge(args: argparse.Namespace) -> int:
    """Merge shard reports into one (``podstate.check.merge``): write OUT.json and the JUnit and
    Markdown reports asked for, print the table; return the whole fleet's exit status, 1
    when a shard report is missing or unreadable (named on stderr)."""
    results = merge.merge_files(args.reports)
    for line in merge.problems(results):
        print(f"podstate: {line}", file=sys.stderr)
    args.json = args.out
    return _write_reports(results, args)


def _inventory(args: argparse.Namespace) -> int:
    """Print the pods the inventory would manage (of ``--shard``'s share, if given), and the
    skipped ones; with ``--names``, only the names, one a line, for pyinfra's --limit."""
    from podstate.inventory.fleet import load_inventory

    shard = shards.parse(args.shard) if args.shard else None
    found = load_inventory(record_host_keys=False)
    chosen = [pod for pod in found.pods if shard is None or shard.holds(pod.name)]
    if args.names:
        print("".join(f"{pod.name}\n" for pod in chosen), end="")
        return 0
    pods = [
        {
            "name": pod.name,
            "address": pod.data.get("ssh_hostname") or pod.name,
            "port": int(pod.data.get("ssh_port") or 22),
            "user": pod.data.get("ssh_user"),
            "groups": pod.groups,
            "pod_id": pod.data.get("pod_id"),
        }
        for pod in chosen
    ]
    skipped = [{"id": s.id, "name": s.name, "reason": s.reason} for s in found.skipped]
    if args.json:
        print(json.dumps({"source": found.source, "pods": pods, "skipped": skipped}, indent=2))
        return 0
    width = max((len(pod["name"]) for pod in pods), default=0)
    for pod in pods:
        user = f"{pod['user']}@" if pod["user"] else ""
        address = f"{user}{pod['address']}:{pod['port']}"
        print(f"{pod['name']:{width}}  {address:28} {', '.join(pod['groups'])}")
    for item in found.skipped:
        print(item.line().removeprefix("podstate: "))
    print(f"{len(pods)} pods from the {found.source}, {len(skipped)} skipped")
    return 0


def _watch(args: argparse.Namespace) -> int:
    """Watch the fleet (``podstate.watch.loop``); return 0 when stopped by a signal, or with
    ``--once`` the fleet's status after the pass."""
    options = watch.Options(
        deploys=args.deploy or runner.deploy_files(),
        interval=args.interval,
        check_every=args.check_every,
        max_backoff=args.max_backoff,
        exclude=tuple(args.exclude or ()),
        json=args.json,
        once=args.once,
        passes=args.passes,
    )
    return watch.run(options)


def _fleet_arguments(command: argparse.ArgumentParser, verb: str) -> None:
    """Add the options that choose the pods and deploy files: --inventory, --deploy, --limit."""
    command.add_argument("--inventory", default="inventories/pods.py")
    command.add_argument(
        "--deploy",
        action="append",
        metavar="FILE",
        help=f"a deploy file to {verb} (repeatable; default: every deploy/*.py, in name order)",
    )
    command.add_argument(
        "--limit",
        action="append",
        help="a group's name, or else a glob of pod names, as pyinfra's --limit: repeatable, "
        "and a comma is part of the pattern",
    )


def parser() -> argparse.ArgumentParser:
    """Return the argument parser for every subcommand."""
    top = argparse.ArgumentParser(prog="podstate", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    box = commands.add_parser("sandbox", help="local sandbox pods: real sshd, RunPod-shaped")
    box.add_argument(
        "action",
        choices=["up", "down", "status", "restart", "api"],
        help="restart POD: restart a pod as RunPod does (container disk wiped, volume kept, "
        "new host key); api: print the shell lines that point podstate at the sandbox's "
        "RunPod API",
    )
    box.add_argument("pod", nargs="?", help="the pod to restart (restart)")
    box.add_argument("--pods", type=int, default=4, help="how many pods (up; default 4)")
    box.add_argument(
        "--nvidia-smi-delay", type=float, default=0, metavar="SECONDS",
        help="how long each call of the pods' nvidia-smi takes (up; default 0; real multi-GPU "
        "hosts without persistence mode take seconds)",
    )  # fmt: skip
    box.set_defaults(run=_sandbox)
    drift = commands.add_parser(
        "check",
        help="report drift without changing any pod (exit 0 ok, 2 drift, 1 worse)",
    )
    _fleet_arguments(drift, "plan")
    drift.add_argument("--json", metavar="PATH", help="write the JSON report here")
    drift.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here")
    drift.add_argument("--diff", action="store_true", help="show unified diffs of managed files")
    drift.add_argument(
        "--markdown",
        metavar="PATH",
        help="write a compact Markdown report here (a CI job summary, a pull request comment)",
    )
    drift.add_argument(
        "--strict-host-keys",
        action="store_true",
        help="refuse pods whose host key is not in the store yet, instead of trusting it",
    )
    drift.add_argument(
        "--timeout", type=int, default=settings.CONNECT_TIMEOUT, help="SSH connect timeout, seconds"
    )
    drift.add_argument(
        "--shard",
        metavar="K/N",
        help="check only shard K of N: the pods whose name hashes to it (a CI matrix job)",
    )
    drift.set_defaults(run=_check)
    waiting = commands.add_parser(
        "wait",
        help="wait until every selected pod is ready for the current desired state "
        "(exit 0 all ready, 1 not at the timeout)",
    )
    _fleet_arguments(waiting, "plan")
    waiting.add_argument("--timeout", type=int, default=600, help="seconds (default 600)")
    waiting.add_argument(
        "--interval", type=int, default=5, help="seconds between checks (default 5)"
    )
    waiting.set_defaults(run=_wait)
    report = commands.add_parser("report", help="work on check reports")
    report_actions = report.add_subparsers(dest="action", required=True)
    merging = report_actions.add_parser(
        "merge",
        help="merge shard reports (check --json) into one; exit 0 ok, 2 drift, 1 worse",
    )
    merging.add_argument("out", metavar="OUT.json", help="the merged JSON report to write")
    merging.add_argument("reports", metavar="IN.json", nargs="+", help="the shards' reports")
    merging.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here")
    merging.add_argument("--markdown", metavar="PATH", help="write a compact Markdown report here")
    merging.add_argument("--diff", action="store_true", help="show unified diffs in the table")
    merging.set_defaults(run=_merge)
    listing = commands.add_parser(
        "inventory", help="list the pods to manage (pods file or RunPod API) and skipped ones"
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.add_argument("--shard", metavar="K/N", help="only the pods of shard K of N")
    listing.add_argument(
        "--names",
        action="store_true",
        help="print only the names, one a line (for pyinfra --limit NAME ...)",
    )
    listing.set_defaults(run=_inventory)
    looping = commands.add_parser(
        "watch",
        help="put new, restarted, moved and drifted pods back, in a loop (or --once)",
    )
    looping.add_argument(
        "--deploy",
        action="append",
        metavar="FILE",
        help="a deploy file to apply (repeatable; default: every deploy/*.py, in name order)",
    )
    looping.add_argument(
        "--interval", type=float, default=30.0, help="seconds from one pass to the next (30)"
    )
    looping.add_argument(
        "--check-every",
        type=int,
        default=10,
        metavar="N",
        help="a drift check of the whole fleet every N passes, the first included (10)",
    )
    looping.add_argument(
        "--max-backoff",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="the longest wait before a failing pod is tried again (900)",
    )
    looping.add_argument(
        "--exclude",
        action="append",
        metavar="POD",
        help="hold this pod (name or glob; repeatable): checked and logged, never changed",
    )
    looping.add_argument("--json", action="store_true", help="one JSON object per event line")
    looping.add_argument(
        "--once",
        action="store_true",
        help="one pass with a check, then exit with the fleet's status (0 ok, 2 drift, 1 worse)",
    )
    looping.add_argument("--passes", type=int, help=argparse.SUPPRESS)  # tests: stop after N
    looping.set_defaults(run=_watch)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; errors are one line on stderr and exit status 1."""
    args = parser().parse_args(argv)
    signals.install()
    try:
        verify()  # a pyinfra that lacks an internal podstate relies on: one line, nothing run
        return args.run(args)
    except (
        Unsupported,
        runner.CheckFailed,
        SpecError,
        shards.ShardError,
        watch.WatchError,
    ) as e:
        print(f"podstate: {e}", file=sys.stderr)
        return 1
