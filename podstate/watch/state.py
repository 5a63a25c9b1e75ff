"""The watch's state file: each pod's idle period (``podstate.watch.idle.Period``), kept on
the machine running the watch so a restarted watch knows since when a pod has been idle, and
``podstate check --watch-state`` can say it.

``--state PATH``; by default ``$XDG_CACHE_HOME/podstate/watch-state.json`` (``~/.cache``
without it), ``watch-state-KofN.json`` for ``--shard K/N``: each shard keeps its own, so two
shards on one machine never write one file. Written whole at every pass, atomically (a
temporary file beside it, then a rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from podstate.check.result import PodResult
from podstate.check.shards import Shard
from podstate.watch.idle import Period, cost_since
from podstate.watch.options import WatchError

VERSION = 1
FRESH_S = 3600.0  # a state last written longer ago says nothing of now: no watch is running


class StateError(WatchError):
    """The state file cannot be read or written: one line."""


def default_path(shard: Shard | None = None) -> Path:
    """Return where the watch (of ``shard``, if given) keeps its state when not told: under
    the user's cache, a file per shard, since a state file holds only its watch's pods."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    name = f"watch-state-{shard.index}of{shard.count}.json" if shard else "watch-state.json"
    return Path(base) / "podstate" / name


def load(path: Path) -> dict[str, Period]:
    """Return the periods the file at ``path`` keeps, by pod name; none when it does not
    exist. StateError, one line, when it is not a state file: the watch does not guess
    since when a pod has been idle."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise StateError(f"cannot read the watch state {path}: {_why(e)}") from None
    try:
        if document["version"] != VERSION:
            raise ValueError(f"version {document['version']!r}, not {VERSION}")
        return {str(n): Period.from_json(e) for n, e in document["pods"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise StateError(f"{path} is not a watch state file ({_why(e)})") from None


def save(path: Path, periods: dict[str, Period]) -> None:
    """Write ``periods`` to ``path`` atomically (mode 0600, its directory made 0700 when
    missing); StateError, one line, when it cannot."""
    document: dict[str, Any] = {
        "version": VERSION,
        "pods": {name: periods[name].to_json() for name in sorted(periods)},
    }
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".watch-state.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(document, handle, indent=1)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise StateError(f"cannot write the watch state {path}: {_why(e)}") from None


def annotate(results: dict[str, PodResult], path: Path, now: datetime) -> None:
    """Give each pod the check found idle the watch's idle period (``idle_since``,
    ``cost_since``), from the state file at ``path``: only where the watch read the pod
    within ``FRESH_S`` and has it idle too. StateError, one line, when the file is not a
    state file, and when there is no file there (a mistyped path says so)."""
    if not path.is_file():
        raise StateError(f"no watch state at {path} (podstate watch --state writes it)")
    periods = load(path)
    for name, result in results.items():
        period = periods.get(name)
        if (
            result.idle is True
            and period is not None
            and period.since is not None
            and (now - period.seen).total_seconds() <= FRESH_S
        ):
            result.idle_since = period.since.strftime("%Y-%m-%dT%H:%M:%SZ")
            result.cost_since = cost_since(replace(period, cost_per_hour=result.cost_per_hour), now)


def _why(error: Exception) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__
