"""The probe's repos section: each repository as the pod's own clone knows it.

scripts/repo_state.sh reads where HEAD is, and where the wanted ref is as the clone last
fetched it (origin is asked where a branch is now only when the pod can: no deploy key),
so the check and a no-op apply never contact the git host.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import Any

from podstate.facts.decode import decode
from podstate.facts.section import Argument, Section
from podstate.shell import b64, quote_path, script


@dataclass(frozen=True)
class Checkout:
    """A repository as the pod's own clone knows it."""

    kind: str | None  # "repo", "absent", "empty", ... (scripts/repo_state.sh); "unknown"
    head: str | None = None  # the commit HEAD is at
    branch: str = ""  # the branch checked out ("": detached)
    url: str = ""  # origin's URL
    want: tuple[str, str] | None = None  # the wanted ref as the clone knows it: (kind, commit)
    remote: str | None = None  # where origin's branch is now: a commit, "none", "?"; None: unasked
    dirty: tuple[str, ...] = ()  # ``git status --porcelain`` lines
    alone: tuple[str, ...] = ()  # "HASH SUBJECT": commits only a detached HEAD holds (6 at most)


@dataclass(frozen=True)
class Repos:
    """What the probe read of the repositories."""

    git: bool  # git is on the pod
    paths: dict[str, Checkout]  # each repository; none when git is not (nothing more was read)


@dataclass(frozen=True)
class RepoRequest:
    """One repository the repos section reads (an item of ``Request.repos``)."""

    path: str  # the checkout's path
    ref: str  # the wanted ref
    ask: bool  # ask origin where a branch is (no deploy key: the pod can)


def sent(asked: tuple[RepoRequest, ...]) -> list[dict[str, Any]] | None:
    """Return the probe's ``repos`` argument for ``asked``, the plain list of dicts pyinfra's
    fact is called with (``probe_lines``' ``repos``); None for none, which reads nothing."""
    return [{"path": r.path, "ref": r.ref, "ask": r.ask} for r in asked] or None


# A checkout the probe could not read, since git is installed later in the same run.
UNKNOWN = Checkout(kind="unknown")


def probe_lines(repos: list[dict[str, Any]]) -> list[str]:
    """Return the probe lines for ``repos`` (each ``{"path", "ref", "ask"}``; ``ask``: ask
    origin where a branch is): ``repo.git 1`` when git is on the pod (else ``repo.git 0``),
    then what scripts/repo_state.sh says of each repository."""
    if not repos:
        return []
    calls = "; ".join(
        f"repo_state {b64(r['path'])} {quote_path(r['path'])} {shlex.quote(r['ref'])} "
        f"{1 if r['ask'] else 0}"
        for r in repos
    )
    return [
        script("repo_state.sh"),
        f"if command -v git >/dev/null 2>&1; then echo 'repo.git 1'; {calls}; "
        "else echo 'repo.git 0'; fi",
    ]


def parse(output: list[str]) -> Repos:
    """Return the probe's :class:`Repos` from its ``repo`` lines."""
    paths: dict[str, Checkout] = {}
    git = False
    for line in output:
        key, _, rest = line.partition(" ")
        if key == "repo.git":
            git = rest == "1"
            continue
        name, field, value = (rest.split(" ", 2) + ["", ""])[:3]
        path = decode(name)
        item = paths.get(path, Checkout(kind=None))
        if field == "kind":
            item = replace(item, kind=value)
        elif field == "head":
            item = replace(item, head=value)
        elif field == "remote":
            item = replace(item, remote=value)
        elif field == "branch":
            item = replace(item, branch=decode(value).strip("\n"))
        elif field == "url":
            item = replace(item, url=decode(value).strip("\n"))
        elif field == "want":
            kind, _, commit = value.partition(" ")
            item = replace(item, want=(kind, commit))
        elif field == "dirty":
            item = replace(item, dirty=_lines(value))
        elif field == "alone":
            item = replace(item, alone=_lines(value))
        paths[path] = item
    return Repos(git=git, paths=paths)


def _lines(value: str) -> tuple[str, ...]:
    """Return the non-blank lines of the base64 ``value``: a field that lists things."""
    return tuple(x for x in decode(value).splitlines() if x.strip())


SECTION = Section(
    "repos",
    fields=("repos",),
    parse=lambda answer: {"repos": parse(answer.lines("repo")) if "repo" in answer else None},
    lines=lambda arguments: probe_lines(arguments["repos"] or []),
    arguments=(Argument("repos", sent=sent),),
)
