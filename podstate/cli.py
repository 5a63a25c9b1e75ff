"""The podstate command: what pyinfra's own CLI does not cover."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from podstate import progress, signals
from podstate.arguments import parser
from podstate.check import markdown as report_markdown
from podstate.check import merge, reports, result, runner, shards
from podstate.check.result import PodResult
from podstate.desired.errors import SpecError
from podstate.progress import Progress
from podstate.pyinfra_api.verify import Unsupported, verify
from podstate.watch import loop as watch
from podstate.watch import state as watched
from podstate.watch.options import Options as WatchOptions
from podstate.watch.options import WatchError


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
            pods_file = lifecycle.up(
                pods=args.pods, nvidia_smi_delay=args.nvidia_smi_delay, vast=args.vast
            )
            vast = f" and {args.vast} Vast instances" if args.vast else ""
            print(f"{args.pods} sandbox pods{vast} are up; pods file: {pods_file}")
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


def _progress(command: str, done: str = "checked") -> Progress:
    """Return the progress display of a long run, on stderr (redrawn there on a terminal)."""
    return Progress(command, sys.stderr, sys.stderr.isatty(), done)


def _wait(args: argparse.Namespace) -> int:
    """Wait until every selected pod is ready for the current desired state."""
    from podstate.check import wait

    deploys = args.deploy or runner.deploy_files()
    display = _progress("wait", done="ready")
    with progress.shown(display):
        return wait.run(
            args.inventory,
            deploys,
            args.limit or [],
            args.timeout,
            args.interval,
            strict_host_keys=True if args.strict_host_keys else None,
            progress=display,
        )


def _report_paths(args: argparse.Namespace) -> list[str]:
    """Return the paths of the reports asked for, each checked before any pod is contacted:
    its directory exists and may be written, and ``-`` (stdout) is given once at most;
    CheckFailed, one line, if not."""
    paths = [path for path in (args.json, args.junit, args.markdown) if path]
    if paths.count("-") > 1:
        raise runner.CheckFailed("only one report can be written to stdout (-)")
    for path in paths:
        target = Path(path)
        if path == "-":
            continue
        if target.is_dir():
            raise runner.CheckFailed(f"cannot write the report {path}: it is a directory")
        if not target.parent.is_dir():
            raise runner.CheckFailed(
                f"cannot write the report {path}: no directory {target.parent}"
            )
        if (
            not os.access(target.parent, os.W_OK)
            or not os.access(target, os.W_OK)
            and target.exists()
        ):
            raise runner.CheckFailed(f"cannot write the report {path}: permission denied")
    return paths


def _write(path: str, text: str) -> None:
    """Write a report (``-``: to stdout); a path that cannot be written is CheckFailed."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise runner.CheckFailed(f"cannot write the report {path}: {e.strerror or e}") from None


def _check(args: argparse.Namespace) -> int:
    """Run the drift check, write the reports asked for; return the check's exit status."""
    _report_paths(args)
    deploys = args.deploy or runner.deploy_files()
    shard = shards.parse(args.shard) if args.shard else None
    display = _progress("check")
    with progress.shown(display):
        results = runner.run(
            args.inventory,
            deploys,
            args.limit or [],
            timeout=args.timeout,
            shard=shard,
            strict_host_keys=True if args.strict_host_keys else None,  # else the environment's
            progress=display.pod,
        )
    if args.watch_state:
        watched.annotate(results, Path(args.watch_state), datetime.now(UTC))
    return _write_reports(results, args)


def _write_reports(results: dict[str, PodResult], args: argparse.Namespace) -> int:
    """Print the table (to stderr when a report goes to stdout), write the reports ``args``
    asks for; return the fleet's exit status."""
    table = sys.stderr if "-" in _report_paths(args) else sys.stdout
    table.write(reports.table(results, diff=args.diff))
    table.flush()
    if args.json:
        _write(args.json, json.dumps(result.to_json(results), indent=2) + "\n")
    if args.junit:
        _write(args.junit, reports.junit(results))
    if args.markdown:
        _write(args.markdown, report_markdown.markdown(results))
    return result.exit_code(results)


def _uninstall(args: argparse.Namespace) -> int:
    """Remove what podstate made on the chosen pods (or, with --dry-run, list it); print
    the table of what is left (or would go); return the check's exit status, 1 when the
    apply failed."""
    from podstate.check import uninstall

    display = _progress("uninstall")
    with progress.shown(display):
        results, status = uninstall.run(
            args.inventory,
            args.limit or [],
            dry_run=args.dry_run,
            volume=args.volume,
            packages=args.packages,
            keep_venv=args.keep_venv,
            discard_scratch=args.discard_scratch,
            timeout=args.timeout,
            strict_host_keys=True if args.strict_host_keys else None,
            progress=display.pod,
        )
    sys.stdout.write(reports.table(results, diff=args.diff))
    return 1 if status else result.exit_code(results)


def _merge(args: argparse.Namespace) -> int:
    """Merge shard reports into one (``podstate.check.merge``): write OUT.json and the JUnit and
    Markdown reports asked for, print the table; return the whole fleet's exit status, 1
    when a shard report is missing or unreadable (named on stderr)."""
    args.json = args.out
    _report_paths(args)
    results = merge.merge_files(args.reports)
    for line in merge.problems(results):
        print(f"podstate: {line}", file=sys.stderr)
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
            "endpoint": pod.data.get("endpoint") or "direct",
            "user": pod.data.get("ssh_user"),
            "groups": pod.groups,
            "pod_id": pod.data.get("pod_id"),
            "provider": pod.data.get("provider"),
        }
        for pod in chosen
    ]
    skipped = [
        {"id": s.id, "provider": s.provider, "name": s.name, "reason": s.reason}
        for s in found.skipped
    ]
    if args.json:
        doc = {"source": found.source, "pods": pods, "skipped": skipped, "notes": found.notes}
        print(json.dumps(doc, indent=2))
        return 0
    width = max((len(pod["name"]) for pod in pods), default=0)
    for pod in pods:
        user = f"{pod['user']}@" if pod["user"] else ""
        address = f"{user}{pod['address']}:{pod['port']}"
        via = " (proxy)" if pod["endpoint"] == "proxy" else ""
        print(f"{pod['name']:{width}}  {address + via:28} {', '.join(pod['groups'])}")
    for item in found.skipped:
        print(item.line().removeprefix("podstate: "))
    for note in found.notes:
        print(note)
    print(f"{len(pods)} pods from the {found.source}, {len(skipped)} skipped")
    return 0


def _watch(args: argparse.Namespace) -> int:
    """Watch the fleet (``podstate.watch.loop``); return 0 when stopped by a signal, or with
    ``--once`` the fleet's status after the pass."""
    options = WatchOptions(
        deploys=args.deploy or runner.deploy_files(),
        interval=args.interval,
        check_every=args.check_every,
        max_backoff=args.max_backoff,
        exclude=tuple(args.exclude or ()),
        json=args.json,
        once=args.once,
        passes=args.passes,
        state=args.state,
        dry_run=args.dry_run,
    )
    return watch.run(options)


COMMANDS = {
    "check": _check,
    "wait": _wait,
    "uninstall": _uninstall,
    "merge": _merge,
    "inventory": _inventory,
    "watch": _watch,
    "sandbox": _sandbox,
}


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand; errors are one line on stderr and exit status 1, a usage error
    too. A bare ``podstate`` prints the help, and exits 1: a CI line whose subcommand came
    out empty must not pass."""
    top = parser()
    args = top.parse_args(argv)
    if args.command is None:
        top.print_help(sys.stderr)
        return 1
    signals.install()
    try:
        verify()  # a pyinfra that lacks an internal podstate relies on: one line, nothing run
        return COMMANDS[args.command](args)
    except (
        Unsupported,
        runner.CheckFailed,
        SpecError,
        shards.ShardError,
        WatchError,
    ) as e:
        print(f"podstate: {e}", file=sys.stderr)
        return 1
