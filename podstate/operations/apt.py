"""The pyinfra operation of the packages role: install missing Debian packages with apt-get.

roles/packages.py decides from the pod probe (its ``apt``: what dpkg has installed); the
operation runs scripts/apt_install.sh with the packages as arguments, under the run's pod
lock. Packages are installed, never removed.
"""

from __future__ import annotations

import shlex
from collections.abc import Generator

from pyinfra import host
from pyinfra.api import operation

from podstate import settings
from podstate.facts.apt import Apt
from podstate.run import findings
from podstate.run.lock import Change, changing
from podstate.shell import script


def missing(packages: list[str], found: Apt) -> list[str]:
    """Return the ``packages`` the probe's ``apt`` did not find installed, in their order."""
    return [p for p in packages if p not in found.installed]


def install_command(packages: list[str], update: bool, wait: int) -> str:
    """Return the sh command that installs ``packages`` (after ``apt-get update`` with
    ``update``), waiting at most ``wait`` seconds for another apt's lock; see
    scripts/apt_install.sh. Its exit status is 0 only when every package is installed."""
    words = ["sh -c", shlex.quote(script("apt_install.sh")), "apt_install", str(wait)]
    return " ".join([*words, "1" if update else "0", *map(shlex.quote, packages)])


@operation()
def apt_packages(packages: list[str], found: Apt) -> Generator[Change, None, None]:
    """
    Install the Debian packages that are missing, non-interactively; never remove any.

    + packages: package names
    + found: the pod probe's ``apt`` (``apt_get``: apt-get is there; ``installed``)

    ``apt-get update`` runs first, once per run on a pod, and only when a package is
    missing. Another apt's lock is waited for ``PODSTATE_APT_LOCK_WAIT`` seconds. A pod
    without apt-get is a violation; an unknown package fails the pod, naming it, and
    installs nothing.

    **Example:**

    .. code:: python

        apt_packages(name="Install tmux", packages=["tmux"], found=probe.apt)
    """
    absent = missing(packages, found)
    if not absent:
        host.noop(f"{', '.join(packages)} installed")
        return
    if not found.apt_get:
        findings.violation(
            f"this pod has no apt-get (not a Debian or Ubuntu image), so podstate cannot "
            f"install {', '.join(absent)}: use an image that has them, or drop packages.apt",
            "packages.apt",
        )
        return
    found_here = findings.of(host)
    update, found_here.apt_updated = not found_here.apt_updated, True
    yield changing(
        install_command(absent, update, settings.APT_LOCK_WAIT), ttl=settings.APT_TIMEOUT
    )
