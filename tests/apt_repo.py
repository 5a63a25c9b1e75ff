"""A local apt repository for end-to-end tests: tiny .deb packages built with dpkg-deb, served
to sandbox pods as a ``file:`` source, so packages install offline."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

from tests.e2e import Fleet

REPO = "/srv/podstate-apt"  # on each pod
# The pod's own sources go here (its /etc is its own): apt then knows only the local repository.
SET_ASIDE = "/etc/apt/podstate-test-sources"


def build_deb(work: Path, name: str, version: str = "1.0") -> Path:
    """Return a .deb of package ``name`` that installs /usr/share/<name>/hello."""
    root = work / f"{name}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: podstate tests <tests@example.com>\nDescription: a podstate test package\n"
    )
    (root / "usr/share" / name).mkdir(parents=True)
    (root / "usr/share" / name / "hello").write_text(f"{name} {version}\n")
    deb = work / f"{name}_{version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)],
        check=True,
        capture_output=True,
    )
    return deb


def packages_index(debs: list[Path]) -> str:
    """Return the ``Packages`` index of a flat repository holding ``debs``."""
    entries = []
    for deb in debs:
        control = subprocess.run(
            ["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True
        ).stdout
        data = deb.read_bytes()
        entries.append(
            control.rstrip("\n")
            + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
            + f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    return "\n".join(entries)


def serve(fleet: Fleet, pod: str, debs: list[Path]) -> None:
    """Make ``debs`` the only apt source of ``pod``: a flat ``file:`` repository at REPO."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for deb in debs:
            tar.add(deb, arcname=deb.name)
        index = packages_index(debs).encode()
        info = tarfile.TarInfo("Packages")
        info.size = len(index)
        tar.addfile(info, io.BytesIO(index))
    fleet.out(pod, f"mkdir -p {REPO} && tar -x --no-same-owner -C {REPO}", archive.getvalue())
    fleet.out(
        pod,
        f"mkdir -p {SET_ASIDE} && for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do"
        f' [ -e "$f" ] && mv "$f" {SET_ASIDE}/; done;'
        f" echo 'deb [trusted=yes] file:{REPO} ./' > /etc/apt/sources.list.d/podstate-test.list",
    )
