"""The probe's boot section: the RunPod pod id, and whether the host keys the boot hook keeps
on the volume are the pod's own (compared on the pod: no key ever leaves it)."""

from __future__ import annotations

from typing import Any

from podstate.facts.decode import by_key, decode
from podstate.shell import quote_path


def probe_lines(args: dict[str, Any] | None) -> list[str]:
    """Return the probe's lines for the hook (read-only): ``boot.pod_id``, the RunPod pod
    id the container's start script wrote to /etc/rp_environment, and with ``keys`` (the
    data directory) ``boot.keys``: ``same`` when the host keys saved there are the pod's
    own, compared on the pod (no key ever leaves it), else ``differs``."""
    if not args:
        return []
    lines = [
        "if [ -r /etc/rp_environment ]; then"
        " i=$(sed -n 's/^export RUNPOD_POD_ID=//p' /etc/rp_environment); enc \"$i\";"
        ' echo "boot.pod_id $enc_v"; fi'
    ]
    if args.get("keys"):
        d = quote_path(args["keys"])
        lines.append(
            f"k=differs; if [ -f {d}/hostkeys.tar ] && {{ read -r s _ <{d}/hostkeys.sum; }}"
            ' 2>/dev/null && [ "$(cat /etc/ssh/ssh_host_* 2>/dev/null | sha256sum)" = "$s  -" ];'
            ' then k=same; fi; echo "boot.keys $k"'
        )
    return lines


def parse(output: list[str]) -> dict[str, Any]:
    """Return the probe's ``boot`` dict from its ``boot.*`` lines: ``pod_id`` (None when not
    found) and ``keys``."""
    fields = by_key(output)
    ids = [line.strip().strip("\"'") for line in decode(fields.get("pod_id", "=")).splitlines()]
    ids = [i for i in ids if i]
    return {"pod_id": ids[-1] if ids else None, "keys": fields.get("keys")}
