"""The storage sshd: serves every sshfs pod's /workspace, as a network volume.

One SFTP-only sshd for the whole sandbox, in a mount namespace of its own; each sshfs pod
mounts its own directory of the state directory's ``storage/`` from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podstate.sandbox.prepare import shell_quote
from podstate.sandbox.processes import spawn
from podstate.sandbox.ssh import SSHD, common_sshd_options, public_key, sshd_quote


def start_storage(root: Path, port: int) -> dict[str, Any]:
    """Start the storage sshd that serves every sshfs pod's /workspace; return its record."""
    storaged = root / "storaged"
    (storaged / "authorized_keys").write_text(public_key(storaged / "client_key.pub") + "\n")
    (storaged / "sshd_config").write_text(
        "# podstate sandbox storage: serves each sshfs pod's /workspace (SFTP only)\n"
        f"Port {port}\n"
        f"HostKey {sshd_quote(storaged / 'host_key')}\n"
        f"AuthorizedKeysFile {sshd_quote(storaged / 'authorized_keys')}\n"
        "PermitRootLogin prohibit-password\n"
        "StrictModes no\n"
        "PidFile none\n"
        "LogLevel INFO\n"
        "AllowTcpForwarding no\n"
        "PermitTTY no\n"
        "Subsystem sftp internal-sftp\n"
        "ForceCommand internal-sftp\n" + common_sshd_options()
    )
    # Its own mount namespace, for a private /run/sshd (privilege separation) without
    # touching the host's /run.
    script = (
        "mount -t tmpfs -o mode=0755 storage-run /run && mkdir -m 0755 /run/sshd && "
        f"exec {SSHD} -D -e -f {shell_quote(storaged / 'sshd_config')}"
    )
    record = spawn(["--mount"], ["/bin/sh", "-c", script], storaged, storaged / "sshd.log")
    return {"port": port, **record}
