"""What the probe reads for the repos role, and the operation that clones or checks out.

The probe reads each repository from the pod's own clone (scripts/repo_state.sh): where
HEAD is, and where the wanted ref is as the clone last fetched it. So the check and a
no-op apply never contact the git host. The operation (scripts/repo.sh) clones or fetches
and checks out; a deploy key is uploaded over SFTP for it alone and removed after it.
"""

from __future__ import annotations

import hashlib
import io
import os
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.command import FileUploadCommand, PyinfraCommand

from podstate.desired.secret import Secret, masked
from podstate.paths import GIT_KNOWN_HOSTS, SECRETS_DIR
from podstate.run import findings
from podstate.run.lock import changing
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


def parse(lines: list[str]) -> dict[str, Any]:
    """Return the probe's ``repos`` dict from its ``repo`` lines.

    ``{"git": True, "paths": {PATH: {"kind": "repo", "head": SHA, "branch": "main",
    "url": URL, "want": ("tag", SHA) | None, "remote": SHA | "none" | "?" | None,
    "dirty": [porcelain lines]}}}``; a path is missing when git is not on the pod (nothing
    more could be read). ``remote`` is where origin's branch is now (None: not asked).
    """
    from podstate.facts.probe import _decode

    paths: dict[str, dict[str, Any]] = {}
    git = False
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "repo.git":
            git = rest == "1"
            continue
        name, field, value = (rest.split(" ", 2) + ["", ""])[:3]
        item = paths.setdefault(
            _decode(name),
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
            item[field] = _decode(value).strip("\n")
        elif field == "want":
            kind, _, commit = value.partition(" ")
            item["want"] = (kind, commit)
        elif field == "dirty":
            item["dirty"] = [x for x in _decode(value).splitlines() if x.strip()]
    return {"git": git, "paths": paths}


def shown_url(url: str) -> str:
    """Return ``url`` fit for a report: a password or token in it is replaced by ``***``.

    The desired state holds none (podstate refuses one there); this is for the origin a
    clone on the pod was given by hand, such as ``https://TOKEN@github.com/org/repo``."""
    return masked(url)


def problem(path: str, found: dict[str, Any] | None, git: bool) -> str | None:
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
    kind = (found or {}).get("kind")
    if kind in ("absent", "empty", "repo", "unknown"):
        dirty = found["dirty"] if found else []
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


def drift(path: str, url: str, ref: str, found: dict[str, Any]) -> str | None:
    """Return what differs at ``path`` in words (for the check), or None when it is at ref.

    Compared: HEAD with ``ref`` as the pod's clone knows it (a tag, a commit it has,
    origin's branch: where origin has it now, when the probe could ask, else as of the last
    fetch), the branch HEAD is on for a branch ref, and origin's URL.
    """
    if found["kind"] in ("absent", "empty"):
        return f"{path} not cloned, want {ref}"
    if found["kind"] == "unknown":
        return f"{path} at {ref} once git is installed"
    head = (found["head"] or "")[:7] or "no commit"
    if found["url"] != url:
        origin = shown_url(found["url"]) or "no origin"
        return f"{path} fetches from {origin}, want {shown_url(url)}"
    if found["want"] is None:
        return f"{path} at {head}, want {ref} (not fetched yet)"
    kind, commit = found["want"]
    remote = found.get("remote")
    if kind == "branch" and remote not in (None, "?", commit):
        now = f"has no branch {ref}" if remote == "none" else f"moved {ref} to {remote[:7]}"
        return f"{path} at {head}, origin {now} since the last fetch ({commit[:7]})"
    off_branch = kind == "branch" and found["branch"] != ref
    if found["head"] != commit or off_branch:
        at = f"{head} ({found['branch'] or 'detached'})" if off_branch else head
        return f"{path} at {at}, want {ref} ({commit[:7]})"
    return None


_ASKED: dict[tuple[str, str], str] = {}  # (url, branch) -> what origin said, once per run
_ASKING = threading.Lock()  # pods are planned at once: one asks, the others wait for it


def ask_origin(url: str, branch: str, ssh_key: Secret) -> str:
    """Return where origin's ``branch`` is now, asked from this machine with the deploy key:
    a commit, ``none`` (origin has no such branch) or ``?`` (it could not be asked).

    The key is on a pod only while apply fetches, so a pod cannot ask; this machine asks
    once per run for every pod, with the key in a private temporary file, never prompting,
    within 15 seconds.
    """
    with _ASKING:
        if (url, branch) not in _ASKED:
            _ASKED[url, branch] = _ls_remote(url, branch, ssh_key)
        return _ASKED[url, branch]


def _ls_remote(url: str, branch: str, ssh_key: Secret) -> str:
    """Return what ``git ls-remote`` says of ``branch`` at ``url`` (see ``ask_origin``)."""
    with tempfile.TemporaryDirectory(prefix="podstate-key-") as directory:
        key = os.path.join(directory, "key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write(ssh_key.value if ssh_key.value.endswith("\n") else ssh_key.value + "\n")
        ssh = (
            f"ssh -F /dev/null -i {shlex.quote(key)} -o IdentitiesOnly=yes -o BatchMode=yes "
            "-o StrictHostKeyChecking=accept-new "
            f"-o UserKnownHostsFile={shlex.quote(os.path.join(directory, 'known_hosts'))}"
        )
        env = {**os.environ, "GIT_SSH_COMMAND": ssh, "GIT_TERMINAL_PROMPT": "0"}
        try:
            answer = subprocess.run(
                ["git", "ls-remote", "--", url, f"refs/heads/{branch}"],
                env=env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=15,
            )
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    if answer.returncode != 0:
        return "?"
    return answer.stdout.split()[0] if answer.stdout.split() else "none"


def key_file(path: str) -> str:
    """Return where the deploy key of the repository at ``path`` is uploaded for a fetch."""
    return f"{SECRETS_DIR}/repo-key-{hashlib.sha256(path.encode()).hexdigest()[:16]}"


@operation()
def repository(path: str, url: str, ref: str, found: dict[str, Any], ssh_key: Secret | None = None):
    """
    Clone the repository at ``path``, or fetch it and check out ``ref``; prove HEAD is there.

    + path: absolute path of the working tree on the pod
    + url: the repository (``https://…``, ``git@host:org/repo.git``, ``file:///…``)
    + ref: a tag or a commit (checked out detached) or a branch (at origin's head)
    + found: the probe's entry for ``path`` (the role calls this only for a clean one)
    + ssh_key: a deploy key, uploaded for this fetch only (0600, in a root-only directory)
      and removed when it ends; never in ``.git/config`` or ``~/.ssh``

    **Example:**

    .. code:: python

        repository(name="/root/code/trainer", path="/root/code/trainer",
                   url="https://github.com/org/trainer.git", ref="v1.2.0",
                   found=probe["repos"]["paths"]["/root/code/trainer"])
    """
    what = drift(path, url, ref, found)
    if what is None:
        host.noop(f"{path} is at {ref}")
        return
    findings.describe(what)
    key = "-"
    if ssh_key is not None:
        key = key_file(path)
        yield from _upload_key(ssh_key, key)
    words = [path, url, ref, key, GIT_KNOWN_HOSTS]
    yield changing(
        " ".join(["sh -c", shlex.quote(script("repo.sh")), "repo", *map(shlex.quote, words)])
    )


def _upload_key(ssh_key: Secret, dest: str) -> Iterator[PyinfraCommand | str]:
    """Yield the commands that upload a deploy key to ``dest`` in the root-only directory.

    OpenSSH needs the key's last line to end with a newline; one is added if missing.
    """
    text = ssh_key.value if ssh_key.value.endswith("\n") else ssh_key.value + "\n"
    yield changing(
        f"mkdir -p -m 700 -- {SECRETS_DIR} && chmod 700 -- {SECRETS_DIR} && "
        f"rm -f -- {SECRETS_DIR}/repo-key-*"  # any left by a run killed mid-fetch
    )
    yield FileUploadCommand(io.BytesIO(text.encode("utf-8", "surrogateescape")), dest)
