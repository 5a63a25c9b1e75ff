"""Debian packages: every ``packages.apt`` package installed; none ever removed."""

from __future__ import annotations

from typing import Any

from pyinfra import host

from podstate import roles, settings
from podstate.operations import apt as apt_ops
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run.role import role


def probe_args(wanted: dict[str, Any]) -> list[str] | None:
    """Return the packages whose dpkg status the probe must read, or None when none are
    listed (the probe then asks nothing about packages)."""
    return list((wanted.get("packages") or {}).get("apt") or []) or None


@role("Packages")
def apply(wanted: dict[str, Any], probe: dict[str, Any] | None = None) -> None:
    """Install the listed apt packages that are missing, in one command; first of the roles,
    since others may need what they bring (git for repositories)."""
    packages = probe_args(wanted)
    if not packages:
        return
    probe = probe or roles.probe(wanted)
    if probe is None:
        return
    found = probe["apt"]
    absent = apt_ops.missing(packages, found)
    # Named by what it installs, so the check reports each pod's own missing packages.
    name = f"Install {', '.join(absent)}" if absent else f"apt packages {', '.join(packages)}"
    with pyinfra_plan.keyed(host, name):
        apt_ops.apt_packages(
            name=name, packages=packages, found=found, _timeout=settings.APT_TIMEOUT
        )
