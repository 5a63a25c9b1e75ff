"""Debian packages: every ``packages.apt`` package installed. One podstate installed leaves
with the list only where ``packages.remove_undeclared`` says so (roles/removal.py)."""

from __future__ import annotations

from pyinfra import host

from podstate import settings
from podstate.desired.state import State
from podstate.facts import made
from podstate.facts.probe import Probe
from podstate.facts.record import AptEntry
from podstate.facts.request import Request
from podstate.operations import apt as apt_ops
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import findings
from podstate.run.role import role


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the dpkg status of every listed package
    (none listed: the probe asks nothing about packages), and the records of what podstate
    made (which of them podstate installed)."""
    apt = wanted.packages.apt if wanted.packages else ()
    return Request(apt=apt, made=made.request(wanted)) if apt else Request()


@role("Packages", reads, when=lambda wanted: wanted.packages and wanted.packages.apt)
def apply(wanted: State, probe: Probe) -> None:
    """Install the listed apt packages that are missing, in one command; first of the roles,
    since others may need what they bring (git for repositories)."""
    packages = list(wanted.packages.apt if wanted.packages else ())
    found = probe.apt
    if found is None:  # asked for, not answered: unknown, never taken for none installed
        findings.violation(
            "the installed packages could not be read: run apply again", "packages.apt"
        )
        return
    absent = apt_ops.missing(packages, found)
    old = made.previous(probe.made)
    for package in packages:  # installed by podstate: missing now, or so its record says
        if package in absent or f"apt:{package}" in old:
            findings.made(AptEntry(f"apt:{package}"))
    # Named by what it installs, so the check reports each pod's own missing packages.
    name = f"Install {', '.join(absent)}" if absent else f"apt packages {', '.join(packages)}"
    with pyinfra_plan.keyed(host, name):
        apt_ops.apt_packages(
            name=name, packages=packages, found=found, _timeout=settings.APT_TIMEOUT
        )
