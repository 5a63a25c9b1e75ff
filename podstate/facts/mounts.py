"""The probe's mounts: /proc/self/mounts, and which mount holds a path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from podstate.facts.decode import decode
from podstate.facts.section import Section
from podstate.procfs import unescape
from podstate.sizes import parse_mount_size

# Filesystems whose data lives on another machine. Every FUSE filesystem counts too
# (sshfs, RunPod's MooseFS ``mfs#…`` network volumes show up as plain ``fuse``).
NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "glusterfs",
    "9p",
    "lustre",
    "gpfs",
    "beegfs",
    "moosefs",
    "mfs",
    "afs",
    "ncpfs",
    "ocfs2",
    "gfs2",
    "davfs",
    "virtiofs",
}


@dataclass(frozen=True)
class Mount:
    """One line of /proc/mounts."""

    source: str
    target: str
    fstype: str
    options: tuple[str, ...]

    @property
    def is_network(self) -> bool:
        """True for filesystems that are slow at metadata because they live elsewhere."""
        base = self.fstype.split(".", 1)[0]
        return base in ("fuse", "fuseblk") or base in NETWORK_FS or self.source.startswith("mfs#")

    @property
    def size(self) -> int | None:
        """The ``size=`` of a tmpfs in bytes, when the kernel shows it."""
        for option in self.options:
            if option.startswith("size="):
                return parse_mount_size(option[5:])
        return None


def parse_mounts(text: str) -> list[Mount]:
    """Return the mounts listed in /proc/mounts text, in order (later mounts hide earlier)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            source, target, fstype, options = (unescape(f) for f in fields[:4])
            mounts.append(Mount(source, target, fstype, tuple(options.split(","))))
    return mounts


def mount_of(path: str, mounts: Sequence[Mount]) -> Mount | None:
    """Return the mount that holds the absolute, resolved ``path`` (the last, longest match)."""
    best: Mount | None = None
    for mount in mounts:
        target = mount.target.rstrip("/") or "/"
        if path == target or path.startswith(target.rstrip("/") + "/"):
            if best is None or len(target) >= len(best.target.rstrip("/") or "/"):
                best = mount
    return best


SECTION = Section(
    "mounts",
    fields=("mounts",),
    parse=lambda answer: {"mounts": tuple(parse_mounts(decode(answer.value("mounts") or "")))},
    # read by the shell itself, first (a line of /proc/self/mounts holds no NUL); printed
    # with the sections' own lines
    start=lambda arguments: (
        'm=; while IFS= read -r l; do m="$m$l\n"; done </proc/self/mounts; enc "$m"; m=$enc_v',
    ),
    lines=lambda arguments: ('echo "mounts $m"',),
)
