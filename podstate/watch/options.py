"""The command line of ``podstate watch``, and the checks it passes before the first pass."""

from __future__ import annotations

import os
from dataclasses import dataclass

from podstate.check.shards import Shard


class WatchError(Exception):
    """The watch cannot start (a missing file, a bad option): one line."""


@dataclass(frozen=True)
class Options:
    """The command line of ``podstate watch``."""

    deploys: list[str]
    interval: float = 30.0
    check_every: int = 10
    max_backoff: float = 900.0
    exclude: tuple[str, ...] = ()
    json: bool = False
    once: bool = False
    state: str | None = None  # the state file (podstate.watch.state); None: its default
    dry_run: bool = False  # log the stops it would make, make none
    notify: tuple[str, ...] = ()  # webhook URLs to post events to (podstate.watch.notify)
    metrics_port: int | None = None  # serve Prometheus metrics here (podstate.watch.metrics)
    metrics_address: str = "127.0.0.1"
    shard: Shard | None = None  # only the pods of this shard (``podstate.check.shards``)
    passes: int | None = None  # stop after this many passes (tests; undocumented)

    def watches(self, name: str) -> bool:
        """Return whether the pod named ``name`` is this watch's: in its ``--shard``, or any
        pod without one. The apply's ``--limit`` still reads the whole fleet's groups."""
        return self.shard is None or self.shard.holds(name)


def validate(options: Options, inventory: str) -> None:
    """Raise WatchError, one line, for an option out of range or a missing inventory or
    deploy file: the watch then starts no pass at all."""
    if options.interval <= 0 or options.max_backoff <= 0 or options.check_every < 1:
        raise WatchError("--interval and --max-backoff must be above 0, --check-every at least 1")
    if not options.deploys:
        raise WatchError("no deploy files to apply (run from the repository root)")
    for path, what in [(inventory, "inventory"), *((d, "deploy file") for d in options.deploys)]:
        if not os.path.isfile(path):
            raise WatchError(f"no {what} at {path} (run from the repository root)")
