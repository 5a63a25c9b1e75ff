"""``podstate watch``: the loop that puts pods back (``podstate.watch.loop``)."""

from __future__ import annotations

import argparse
import os

from podstate.check import runner, shards
from podstate.watch import loop
from podstate.watch.options import Options


def watch(args: argparse.Namespace) -> int:
    """Watch the fleet (of ``--shard``'s share, if given: ShardError, one line, for a bad
    one); return 0 when stopped by a signal, or with ``--once`` the fleet's status after the
    pass."""
    options = Options(
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
        notify=(*(args.notify or ()), *os.environ.get("PODSTATE_NOTIFY", "").split()),
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
        shard=None if args.shard is None else shards.parse(args.shard),  # "": an error
    )
    return loop.run(options)
