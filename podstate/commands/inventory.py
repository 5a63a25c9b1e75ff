"""``podstate inventory``: the pods the inventory would manage, and the skipped ones."""

from __future__ import annotations

import argparse
import json
from typing import Any

from podstate.check import shards
from podstate.inventory.fleet import load_inventory


def inventory(args: argparse.Namespace) -> int:
    """Print the pods the inventory would manage (of ``--shard``'s share, if given), and the
    skipped ones; with ``--names``, only the names, one a line, for pyinfra's --limit.
    Return 0 (an inventory that cannot be read raises SpecError, which is one line)."""
    shard = None if args.shard is None else shards.parse(args.shard)  # "": an error
    found = load_inventory(record_host_keys=False)
    chosen = [pod for pod in found.pods if shard is None or shard.holds(pod.name)]
    if args.names:
        print("".join(f"{pod.name}\n" for pod in chosen), end="")
        return 0
    pods: list[dict[str, Any]] = [
        {
            "name": pod.name,
            "address": pod.data.get("ssh_hostname") or pod.name,
            "port": int(pod.data.get("ssh_port") or 22),
            "endpoint": pod.data.get("endpoint") or "direct",
            "user": pod.data.get("ssh_user"),
            "groups": pod.groups,
            "pod_id": pod.data.get("pod_id"),
            "provider": pod.data.get("provider"),
        }
        for pod in chosen
    ]
    skipped = [
        {"id": s.id, "provider": s.provider, "name": s.name, "reason": s.reason}
        for s in found.skipped
    ]
    if args.json:
        doc = {"source": found.source, "pods": pods, "skipped": skipped, "notes": found.notes}
        print(json.dumps(doc, indent=2))
        return 0
    width = max((len(pod["name"]) for pod in pods), default=0)
    for pod in pods:
        user = f"{pod['user']}@" if pod["user"] else ""
        address = f"{user}{pod['address']}:{pod['port']}"
        via = " (proxy)" if pod["endpoint"] == "proxy" else ""
        print(f"{pod['name']:{width}}  {address + via:28} {', '.join(pod['groups'])}")
    for item in found.skipped:
        print(item.line().removeprefix("podstate: "))
    for note in found.notes:
        print(note)
    print(f"{len(pods)} pods from the {found.source}, {len(skipped)} skipped")
    return 0
