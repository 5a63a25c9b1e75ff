"""Files: each ``files`` path holds its content with its mode, written atomically."""

from __future__ import annotations

from typing import Any

from pyinfra import host

from podstate.facts.request import Request
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import bookkeeping, findings
from podstate.run.role import read_probe, role


def reads(wanted: dict[str, Any]) -> Request:
    """Return what the probe reads for this role: every ``files`` path."""
    return Request(files=tuple(wanted.get("files") or {}))


@role("Files")
def apply(wanted: dict[str, Any], probe: dict[str, Any] | None = None) -> None:
    """Write each file whose content or mode differs; anything else at its path (a
    directory, a link, a file too large to read) is a violation and nothing is written."""
    items: dict[str, dict[str, str]] = wanted.get("files") or {}
    if not items:
        return
    probe = probe or read_probe(reads(wanted))
    if probe is None:
        return
    for path, item in items.items():
        name = f"File {path}"
        with pyinfra_plan.keyed(host, name):
            bookkeeping.managed_file(
                name=name,
                path=path,
                content=item["content"],
                found=probe["files"][path],
                own=True,
                mode=item["mode"],
            )
        findings.restorable(path, item["content"], item["mode"])
