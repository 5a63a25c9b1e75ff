"""The operation of the repos role: clone, or fetch and check out, a repository.

It compares what the probe read of the pod's clone (podstate.facts.repos) with the wanted
ref (``drift``); scripts/repo.sh clones or fetches and checks out. A deploy key is
uploaded over SFTP for it alone and removed after it.
"""

from __future__ import annotations

import hashlib
import io
import shlex
from collections.abc import Generator, Iterator

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.command import FileUploadCommand, PyinfraCommand

from podstate.desired.secret import Secret, masked
from podstate.facts.repos import Checkout
from podstate.paths import GIT_KNOWN_HOSTS, SECRETS_DIR
from podstate.run import findings
from podstate.run.lock import changing
from podstate.shell import script


def shown_url(url: str) -> str:
    """Return ``url`` fit for a report: a password or token in it is replaced by ``***``.

    The desired state holds none (podstate refuses one there); this is for the origin a
    clone on the pod was given by hand, such as ``https://TOKEN@github.com/org/repo``."""
    return masked(url)


def drift(path: str, url: str, ref: str, found: Checkout) -> str | None:
    """Return what differs at ``path`` in words (for the check), or None when it is at ref.

    Compared: HEAD with ``ref`` as the pod's clone knows it (a tag, a commit it has,
    origin's branch: where origin has it now, when the probe could ask, else as of the last
    fetch), the branch HEAD is on for a branch ref, and origin's URL.
    """
    if found.kind in ("absent", "empty"):
        return f"{path} not cloned, want {ref}"
    if found.kind == "unknown":
        return f"{path} at {ref} once git is installed"
    head = (found.head or "")[:7] or "no commit"
    if found.url != url:
        origin = shown_url(found.url) or "no origin"
        return f"{path} fetches from {origin}, want {shown_url(url)}"
    if found.want is None:
        return f"{path} at {head}, want {ref} (not fetched yet)"
    kind, commit = found.want
    remote = found.remote
    if kind == "branch" and remote not in (None, "?", commit):
        now = f"has no branch {ref}" if remote == "none" else f"moved {ref} to {remote[:7]}"
        return f"{path} at {head}, origin {now} since the last fetch ({commit[:7]})"
    off_branch = kind == "branch" and found.branch != ref
    if found.head != commit or off_branch:
        at = f"{head} ({found.branch or 'detached'})" if off_branch else head
        return f"{path} at {at}, want {ref} ({commit[:7]})"
    return None


def key_file(path: str) -> str:
    """Return where the deploy key of the repository at ``path`` is uploaded for a fetch."""
    return f"{SECRETS_DIR}/repo-key-{hashlib.sha256(path.encode()).hexdigest()[:16]}"


@operation()
def repository(
    path: str, url: str, ref: str, found: Checkout, ssh_key: Secret | None = None
) -> Generator[PyinfraCommand | str, None, None]:
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
                   found=probe.repos.paths["/root/code/trainer"])
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
