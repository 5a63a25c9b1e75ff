"""Git checkouts: cloned if absent, else fetched and checked out at the wanted ref.

The probe reads each checkout from the pod's own clone (HEAD, the ref as last fetched, the
branch, origin's URL, ``git status``), so a converged pod costs no command beyond it. What
podstate must not change (a working tree with changes or untracked files, something else
at the path, no git on the pod) is a violation, ``repos.<path>``, and left as it is.
"""

from __future__ import annotations

from typing import Any

from podstate import roles
from podstate.operations import repos as repo_ops
from podstate.run import findings
from podstate.run.role import role


def probe_args(wanted: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Return the probe's ``repos`` argument: each path with its ref, and whether the probe
    asks origin where a branch is (not with a deploy key, which is on the pod only while
    apply fetches: this machine asks instead); None: no repos."""
    repos = wanted.get("repos")
    if not repos:
        return None
    return [
        {"path": path, "ref": item["ref"], "ask": item["ssh_key"] is None}
        for path, item in repos.items()
    ]


@role("Repos")
def apply(wanted: dict[str, Any], probe: dict[str, Any] | None = None) -> None:
    """Clone, fetch and check out every repository in ``repos`` that is not at its ref."""
    repos: dict[str, dict[str, Any]] = wanted.get("repos") or {}
    if not repos:
        return
    probe = probe or roles.probe(wanted)
    if probe is None:
        return
    found = probe["repos"] or {"git": False, "paths": {}}
    # git listed in packages.apt is installed earlier in this run: the checkout comes after.
    coming = not found["git"] and "git" in (wanted.get("packages") or {}).get("apt", [])
    for path, item in repos.items():
        state = repo_ops.UNKNOWN if coming else found["paths"].get(path)
        why = repo_ops.problem(path, state, found["git"] or coming)
        if why or state is None:
            findings.violation(why or f"{path} could not be read", f"repos.{path}")
            continue
        key = item["ssh_key"]
        if key is not None and (state.get("want") or ("",))[0] == "branch":
            state = {**state, "remote": repo_ops.ask_origin(item["url"], item["ref"], key)}
        if state.get("remote") == "?":
            findings.violation(
                f"{path}: origin ({repo_ops.shown_url(item['url'])}) could not be asked where "
                f"{item['ref']} is now: compared with the clone's last fetch; fix access to it "
                f"({'from this machine, with ssh_key' if key else 'from the pod'}), or pin a "
                "tag or a commit",
                f"repos.{path}",
            )
        repo_ops.repository(
            name=path,
            path=path,
            url=item["url"],
            ref=item["ref"],
            found=state,
            ssh_key=item["ssh_key"],
        )
