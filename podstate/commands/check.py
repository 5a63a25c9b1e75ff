"""``podstate check``, ``wait``, ``uninstall`` and ``report merge``: checks of the fleet and
the reports written from them.

What only follows a check (the reports' formats, the watch's state file, the merge of shard
reports) is imported where it is used, after the pods are contacted: the time to the first
connection is what a user of a large fleet waits on every check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from podstate import progress
from podstate.check import runner
from podstate.check.result import PodResult, stamp
from podstate.jsonfile import replace_text
from podstate.progress import Progress

if TYPE_CHECKING:
    from podstate.check.shards import Shard


def _progress(command: str, done: str = "checked") -> Progress:
    """Return the progress display of a long run, on stderr (redrawn there on a terminal)."""
    return Progress(command, sys.stderr, sys.stderr.isatty(), done)


def wait(args: argparse.Namespace) -> int:
    """Wait until every selected pod is ready for the current desired state; return 0 when
    each is, 1 when one is not at the timeout."""
    from podstate.check import wait as waiting

    deploys = args.deploy or runner.deploy_files()
    display = _progress("wait", done="ready")
    with progress.shown(display):
        return waiting.run(
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
    paths = [path for path in (args.json, args.junit, args.markdown, args.html) if path]
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
    """Write a report (``-``: to stdout); a file is replaced in one step, so that whoever
    reads or serves it never sees half of one (a pipe or device, in place); a path that
    cannot be written is CheckFailed."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(path)
    try:
        if target.exists() and not target.is_file():
            target.write_text(text, encoding="utf-8")
            return
        replace_text(target, text)
    except OSError as e:
        raise runner.CheckFailed(f"cannot write the report {path}: {e.strerror or e}") from None


def check(args: argparse.Namespace) -> int:
    """Run the drift check, write the reports asked for; return the check's exit status."""
    _report_paths(args)
    if args.metrics:  # a file, checked as a report's path is, before any pod is contacted
        if args.metrics == "-":
            raise runner.CheckFailed("--metrics: expected a file (node_exporter reads one)")
        _report_paths(argparse.Namespace(json=args.metrics, junit=None, markdown=None, html=None))
    deploys = args.deploy or runner.deploy_files()
    shard = None
    if args.shard is not None:  # "" is an error, not the whole fleet
        from podstate.check import shards

        shard = shards.parse(args.shard)
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
        from datetime import UTC, datetime

        from podstate.watch import state as watched

        watched.annotate(results, Path(args.watch_state), datetime.now(UTC))
    if args.metrics:
        _write_metrics(args.metrics, results, Path(args.inventory).stem)
    return _write_reports(results, args, shard, stamp(time.time()))


def _write_metrics(path: str, results: dict[str, PodResult], own: str) -> None:
    """Write the fleet's gauges to ``path`` for node_exporter's textfile collector, in one
    step, each pod with its provider and groups as the inventory the check loaded has them
    (pyinfra's current one: the pods are not listed twice), but for the group pyinfra names
    after the inventory file (``own``); CheckFailed when it cannot."""
    from pyinfra import inventory

    from podstate.pyinfra_api import plan
    from podstate.watch import hooks, metrics

    labels = {
        h.name: (hooks.provider(plan.host_data(h)), tuple(g for g in h.groups if g != own))
        for h in inventory
    }
    try:
        metrics.write_textfile(path, metrics.views(results, labels))
    except OSError as e:
        raise runner.CheckFailed(f"cannot write the metrics {path}: {e.strerror or e}") from None


def _write_reports(
    results: dict[str, PodResult],
    args: argparse.Namespace,
    shard: Shard | None = None,
    checked_at: str | None = None,
) -> int:
    """Print the table (to stderr when a report goes to stdout), write the reports ``args``
    asks for (the JSON one and the page say which ``shard`` it is of, and when the pods
    were read: ``checked_at``); return the fleet's exit status."""
    from podstate.check import reports, result

    table = sys.stderr if "-" in _report_paths(args) else sys.stdout
    table.write(reports.table(results, diff=args.diff))
    table.flush()
    if args.json:
        _write(args.json, json.dumps(result.to_json(results, shard, checked_at), indent=2) + "\n")
    if args.junit:
        _write(args.junit, reports.junit(results))
    if args.markdown:
        from podstate.check import markdown

        _write(args.markdown, markdown.markdown(results))
    if args.html:
        from podstate.check import html

        _write(args.html, html.render(result.to_json(results, shard, checked_at)))
    return result.exit_code(results)


def uninstall(args: argparse.Namespace) -> int:
    """Remove what podstate made on the chosen pods (or, with --dry-run, list it); print
    the table of what is left (or would go); return the check's exit status, 1 when the
    apply failed."""
    from podstate.check import reports, result
    from podstate.check import uninstall as removal

    display = _progress("uninstall")
    with progress.shown(display):
        results, status = removal.run(
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


def merge(args: argparse.Namespace) -> int:
    """Merge shard reports into one (``podstate.check.merge``): write OUT.json and the JUnit and
    Markdown reports asked for, print the table; return the whole fleet's exit status, 1
    when a shard report is missing or unreadable, or the reports are not one whole set of
    shards (each problem named on stderr)."""
    from podstate.check import merge as merging

    args.json = args.out
    _report_paths(args)
    reports = [merging.load(path) for path in args.reports]
    results = merging.merge(reports)
    for line in merging.problems(results):
        print(f"podstate: {line}", file=sys.stderr)
    return _write_reports(results, args, checked_at=merging.oldest(reports))
