"""Scratch storage: a tmpfs where the pod may mount, else a directory on local disk."""

from __future__ import annotations

from typing import Any

from pyinfra.api import deploy

from podstate import findings, operations
from podstate.sizes import format_size


def paths(wanted: dict[str, Any] | None) -> list[str]:
    """Return the paths this role needs probed."""
    return list(wanted or {})


@deploy("Scratch")
def apply(wanted: dict[str, Any] | None, probe: dict[str, Any]) -> list[str]:
    """Converge each scratch path; return the paths that get a new, empty tmpfs.

    Directories below a newly mounted tmpfs disappear under it, so later roles must treat
    them as missing.
    """
    fresh: list[str] = []
    for path, item in (wanted or {}).items():
        info = probe["paths"][path]
        mount = info["mount"]
        at_path = mount is not None and mount.target == info["real"]
        size = format_size(item["size"])
        if at_path and mount.fstype != "tmpfs":
            findings.violation(
                f"scratch {path} is already a {mount.fstype} mount from {mount.source}; podstate "
                "will not hide it: choose another scratch path or unmount it"
            )
        elif probe["can_mount"]:
            operations.tmpfs(
                name=f"Scratch {path} as tmpfs",
                path=path,
                size=item["size"],
                mode=item["mode"],
                mounted_size=mount.size if at_path else None,
            )
            if not at_path:
                fresh.append(path)
        elif at_path:
            operations.directories(
                name=f"Scratch {path} as tmpfs (preexisting, cannot resize)",
                paths={path: item["mode"]},
                missing=[],
                wrong_mode=[path] if info["mode"] != item["mode"] else [],
            )
        elif mount is not None and mount.is_network:
            findings.violation(
                f"scratch {path} ({size}) would be on the network filesystem {mount.fstype} "
                f"at {mount.target}, and this pod cannot mount a tmpfs (no CAP_SYS_ADMIN): "
                "choose a path on the container disk such as /scratch"
            )
        else:
            operations.directories(
                name=f"Scratch {path} as local-disk directory (pod cannot mount tmpfs)",
                paths={path: item["mode"]},
                missing=[] if info["kind"] else [path],
                wrong_mode=[path] if info["kind"] and info["mode"] != item["mode"] else [],
            )
    return fresh
