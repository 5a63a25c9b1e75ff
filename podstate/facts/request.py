"""What a role needs the probe to read: one ``Request``, the probe's arguments as fields.

Each role declares its request in one way, a module-level ``reads(wanted) -> Request``,
from the desired state alone. A role called alone probes with its own request; podstate's
own deploy probes once, with the merge of every role's (podstate.pod.probe). So the probe's
command can be built, and its length checked, before any pod is contacted. Each field is
what a section (podstate.facts.sections) reads: a list, or a frozen record defined in the
section's module (``VenvRequest``, ...); the section's record says how the field becomes its
plain argument of the same name (``Argument.sent``, ``Request.arguments()``); the fields are
in the registry's order.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from podstate.desired.secret import Secret
from podstate.facts import probe, section
from podstate.facts.boot import BootRequest
from podstate.facts.download import DownloadRequest
from podstate.facts.made import MadeRequest
from podstate.facts.repos import RepoRequest
from podstate.facts.secrets import Hidden, probe_stdin
from podstate.facts.sections import SECTIONS
from podstate.facts.venv import VenvRequest


@dataclass(frozen=True)
class Request:
    """The probe's arguments (``PodProbe``): a list is read for each of its items, a
    section that is None is not read at all. ``secrets`` holds the wanted values, which the
    probe's program compares with on the pod (``stdin``)."""

    paths: tuple[str, ...] = ()  # directories: kind, mode, real path, mount
    files: tuple[str, ...] = ()  # managed files: what is there, with its content
    venv: VenvRequest | None = None  # the venv, its interpreter, uv and snapshot
    environ: tuple[str, ...] = ()  # variables whose value in running processes matters
    inert: tuple[str, ...] = ()  # names of processes whose values do not (none is read)
    free: tuple[str, ...] = ()  # paths whose free space matters
    occupied: tuple[str, ...] = ()  # directories whose having anything in them matters
    download: DownloadRequest | None = None  # the download test's url and seconds
    apt: tuple[str, ...] = ()  # Debian packages whose dpkg status matters
    repos: tuple[RepoRequest, ...] = ()  # each checkout, with its ref
    boot: BootRequest | None = None  # the container's identity, and its saved host keys
    made: MadeRequest | None = None  # the records of what podstate made (``volume``)
    secrets: dict[str, Secret] | None = None  # None: the secrets file is not read

    def merge(self, other: Request) -> Request:
        """Return what reads both ``self`` and ``other``: each list once per item, in order.

        A section both set must be asked the same way (ValueError, else: the two roles
        would need two probes)."""
        merged: dict[str, Any] = {}
        for field in fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, tuple | list):
                merged[field.name] = (*mine, *(x for x in theirs if x not in mine))
            elif mine is not None and theirs is not None and mine != theirs:
                raise ValueError(f"two roles ask the probe's {field.name} differently")
            else:
                merged[field.name] = theirs if mine is None else mine
        return Request(**merged)

    def arguments(self) -> dict[str, Any]:
        """Return the keyword arguments of ``PodProbe`` that read this request: each field
        as its section sends it (a list; None for an empty one that is not read at all)."""
        return {name: sent(getattr(self, name)) for name, sent in _SENT.items()}

    def stdin(self, lock_wait: int = 0) -> Hidden:
        """Return the probe's stdin for this request (its command line is the same for every
        one): its program, with the wanted secrets file and values to compare with, if asked."""
        wanted = None if self.secrets is None else probe_stdin(self.secrets)
        return probe.payload({**self.arguments(), "lock_wait": lock_wait}, wanted)


def merge(requests: list[Request]) -> Request:
    """Return the request that reads everything each of ``requests`` reads."""
    merged = Request()
    for request in requests:
        merged = merged.merge(request)
    return merged


# The sections' arguments that ``Request``'s fields make, each with how it is made.
_SENT = section.requested(SECTIONS)
