"""Splitting a fleet across CI runners: ``--shard K/N``.

A pod belongs to shard ``sha256(name) mod N + 1``. The hash depends on the pod's name and
``N`` alone, so the assignment is the same on every runner and every run, and adding or
removing a pod moves no other pod. The CI system runs the N shards; podstate has no scheduler.
Each shard's JSON report records its ``K/N`` (``shard``), so ``podstate.check.merge`` can
tell that the reports it merges are shards 1 to N of one N, each once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_SHARD = re.compile(r"\s*([0-9]{1,9})\s*/\s*([0-9]{1,9})\s*")  # whole text, ASCII digits


class ShardError(ValueError):
    """A ``--shard`` value that is not K/N with 1 <= K <= N: one line."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def holds(self, name: str) -> bool:
        """Return whether the pod named ``name`` is in this shard."""
        return shard_of(name, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(name: str, count: int) -> int:
    """Return the shard (1..count) the pod named ``name`` belongs to.

    sha256 rather than Python's ``hash()``, which is salted per process: every runner of a
    CI matrix must put a pod in the same shard. The first 8 bytes of the digest, modulo
    ``count``, spread names evenly.
    """
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse(text: str) -> Shard:
    """Return the shard ``text`` (``K/N``) names; ShardError, one line, unless 1 <= K <= N."""
    match = _SHARD.fullmatch(text or "")
    if not match:
        raise ShardError(f"--shard {text}: expected K/N, for example 1/4")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ShardError(f"--shard {text}: K/N needs 1 <= K <= N")
    return Shard(index, count)


def select(names: list[str], shard: Shard | None) -> list[str]:
    """Return the names of ``names`` in ``shard``, in their order (all of them for None)."""
    return list(names) if shard is None else [n for n in names if shard.holds(n)]
