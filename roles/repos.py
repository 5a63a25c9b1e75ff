"""Git checkouts: cloned if absent, else fetched and checked out at the wanted ref.

The probe reads each checkout from the pod's own clone (HEAD, the ref as last fetched, the
branch, origin's URL, ``git status``), so a converged pod costs no command beyond it. What
podstate must not change (a working tree with changes or untracked files, something else
at the path, no git on the pod, commits a checkout elsewhere would leave behind) is a
violation, ``repos.<path>``, and left as it is.
"""

from __future__ import annotations

from dataclasses import replace

from podstate.desired.state import State
from podstate.facts import made
from podstate.facts import repos as repo_facts
from podstate.facts.origin import ask_origin
from podstate.facts.probe import Probe
from podstate.facts.record import Entry, RepoEntry
from podstate.facts.repos import Checkout, RepoRequest, Repos
from podstate.facts.request import Request
from podstate.operations import repos as repo_ops
from podstate.roles import files as files_role
from podstate.run import findings
from podstate.run.role import role


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: each repository's path with its ref, and
    whether the probe asks origin where a branch is (not with a deploy key, which is on the
    pod only while apply fetches: this machine asks instead); the directories above each
    (the clone makes those missing, which podstate records)."""
    repos = wanted.repos or {}
    if not repos:
        return Request()
    return Request(
        repos=tuple(
            RepoRequest(path, item.ref, ask=item.ssh_key is None) for path, item in repos.items()
        ),
        paths=tuple(dict.fromkeys(p for path in repos for p in (path, *made.ancestors(path)))),
        made=made.request(wanted),
    )


def problem(path: str, found: Checkout | None, git: bool) -> str | None:
    """Return why the repository at ``path`` is not podstate's to change, or None.

    A missing git, something other than a directory or a checkout at ``path``, or a
    working tree with changes or untracked files (named, up to five) is a violation; the
    path is then left exactly as it is.
    """
    if not git:
        return (
            "git is not installed on this pod: add git to packages.apt (packages converge "
            "before repositories)"
        )
    kind = found.kind if found else None
    if kind in ("absent", "empty", "repo", "unknown"):
        dirty = found.dirty if found else ()
        if not dirty:
            return None
        changed = [x for x in dirty if not x.startswith("??")]
        untracked = [x for x in dirty if x.startswith("??")]
        what = ", ".join(
            f"{len(group)} {label}"
            for group, label in ((changed, "changed"), (untracked, "untracked"))
            if group
        )
        names = ", ".join(x[3:] for x in dirty[:5]) + (", …" if len(dirty) > 5 else "")
        return (
            f"{path} has local changes ({what}: {names}): podstate leaves it as it is; "
            "commit, stash or remove them, then run apply again"
        )
    if kind == "directory":
        return (
            f"{path} is a directory that is not a git checkout of its own: move it away "
            "(or empty it) and run apply again"
        )
    return f"{path} is a {str(kind).replace('_', ' ')}, not a git checkout: move it away"


def left_behind(path: str, ref: str, alone: tuple[str, ...]) -> str:
    """Return the violation for a checkout of ``ref`` at ``path`` that would leave behind
    ``alone``, the commits only its detached HEAD holds (``HASH SUBJECT``, six at most:
    five are named): nothing would hold them then, and no remote can give them back."""
    names = "; ".join(alone[:5]) + ("; and more" if len(alone) > 5 else "")
    return (
        f"{path}: a checkout of {ref} would leave behind commits only its detached HEAD holds "
        f"({names}): podstate leaves it as it is; put them on a branch (git -C {path} branch "
        "NAME) or push them"
    )


def cloned(
    path: str, state: Checkout | None, there: str | None, was: Entry | None
) -> RepoEntry | None:
    """Return the record's ``repo`` entry for the checkout at ``path`` that podstate clones
    in this run, or cloned before (``was``: the record's entry), None for one it did not make.
    ``state`` is the probe's reading of the checkout (``UNKNOWN`` while git comes in this
    run; then ``there``, what the paths section found at it, tells an absent path, which the
    clone makes, from a directory that may hold someone's files: not recorded)."""
    kind = state.kind if state else None
    if kind == "unknown" and there is None:
        kind = "absent"
    ours = isinstance(was, RepoEntry)
    if kind not in ("absent", "empty") and not ours:
        return None
    return RepoEntry(path, kind == "empty" or (isinstance(was, RepoEntry) and was.emptied))


@role("Repos", reads, when=lambda wanted: wanted.repos)
def apply(wanted: State, probe: Probe) -> None:
    """Clone, fetch and check out every repository in ``repos`` that is not at its ref."""
    repos = wanted.repos or {}
    found = probe.repos or Repos(git=False, paths={})
    old = made.previous(probe.made)
    # git listed in packages.apt is installed earlier in this run: the checkout comes after.
    coming = not found.git and "git" in (wanted.packages.apt if wanted.packages else ())
    for path, item in repos.items():
        state = repo_facts.UNKNOWN if coming else found.paths.get(path)
        entry = cloned(path, state, probe.paths[path].kind, old.get(path))
        if entry is not None:
            findings.made(entry)
            files_role.made_directories(path, probe, old)
        why = problem(path, state, found.git or coming)
        if why or state is None:
            findings.violation(why or f"{path} could not be read", f"repos.{path}")
            continue
        if state.alone and repo_ops.drift(path, item.url, item.ref, state):
            findings.violation(left_behind(path, item.ref, state.alone), f"repos.{path}")
            continue
        key = item.ssh_key
        if key is not None and (state.want or ("",))[0] == "branch":
            state = replace(state, remote=ask_origin(item.url, item.ref, key))
        if state.remote == "?":
            findings.violation(
                f"{path}: origin ({repo_ops.shown_url(item.url)}) could not be asked where "
                f"{item.ref} is now: compared with the clone's last fetch; fix access to it "
                f"({'from this machine, with ssh_key' if key else 'from the pod'}), or pin a "
                "tag or a commit",
                f"repos.{path}",
            )
        repo_ops.repository(
            name=path,
            path=path,
            url=item.url,
            ref=item.ref,
            found=state,
            ssh_key=item.ssh_key,
        )
