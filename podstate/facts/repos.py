"""The probe's repos section: each repository as the pod's own clone knows it.

scripts/repo_state.sh reads where HEAD is, and where the wanted ref is as the clone last
fetched it (origin is asked where a branch is now only when the pod can: no deploy key),
so the check and a no-op apply never contact the git host.
"""

from __future__ import annotations

import shlex
from typing import Any

from podstate.facts.decode import decode
from podstate.shell import b64, quote_path, script

# A checkout the probe could not read, since git is installed later in the same run.
UNKNOWN: dict[str, Any] = {
    "kind": "unknown",
    "head": None,
    "branch": "",
    "url": "",
    "want": None,
    "dirty": [],
}


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


def parse(output: list[str]) -> dict[str, Any]:
    """Return the probe's ``repos`` dict from its ``repo`` lines.

    ``{"git": True, "paths": {PATH: {"kind": "repo", "head": SHA, "branch": "main",
    "url": URL, "want": ("tag", SHA) | None, "remote": SHA | "none" | "?" | None,
    "dirty": [porcelain lines]}}}``; a path is missing when git is not on the pod (nothing
    more could be read). ``remote`` is where origin's branch is now (None: not asked).
    """
    paths: dict[str, dict[str, Any]] = {}
    git = False
    for line in output:
        key, _, rest = line.partition(" ")
        if key == "repo.git":
            git = rest == "1"
            continue
        name, field, value = (rest.split(" ", 2) + ["", ""])[:3]
        item = paths.setdefault(
            decode(name),
            {
                "kind": None,
                "head": None,
                "branch": "",
                "url": "",
                "want": None,
                "remote": None,
                "dirty": [],
            },
        )
        if field in ("kind", "head", "remote"):
            item[field] = value
        elif field in ("branch", "url"):
            item[field] = decode(value).strip("\n")
        elif field == "want":
            kind, _, commit = value.partition(" ")
            item["want"] = (kind, commit)
        elif field == "dirty":
            item["dirty"] = [x for x in decode(value).splitlines() if x.strip()]
    return {"git": git, "paths": paths}
