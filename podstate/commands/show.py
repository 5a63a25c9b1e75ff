"""``podstate show POD``: a pod's effective desired state, and where each value came from:
podstate's shipped defaults, group_vars/all.yaml, a group file or the pod's host file."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from podstate.desired.errors import Layer, SpecError
from podstate.desired.load import SHIPPED_NAME, merge
from podstate.inventory import fleet
from podstate.repository import starter

Traced = list[tuple[tuple[str, ...], Any, str]]
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_./~-]+")


def traced(layers: list[Layer]) -> Traced:
    """Return each value of the state ``layers`` merge to, as (key path, value, the display
    of the layer it came from): the last layer that sets the path (a later one that sets it
    no more has dropped it with a null, or replaced what held it). A mapping's values are
    listed one by one; a list, or an empty mapping, is one value."""
    state: dict[str, Any] = {}
    for layer in layers:
        state = merge(state, layer.data)
    out: Traced = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, dict) and (node or not path):
            for key, value in node.items():
                walk(value, (*path, key))
        else:
            out.append((path, node, _setter(layers, path)))

    walk(state, ())
    return out


def _setter(layers: list[Layer], path: tuple[str, ...]) -> str:
    """Return the display of the last layer in which ``path`` is set."""
    for layer in reversed(layers):
        node: Any = layer.data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return layer.display
    return "?"  # not reached: every path of the merged state is set by some layer


def show(args: argparse.Namespace) -> int:
    """Print the effective desired state of pod ``args.pod``, as YAML with the source of each
    value after it (with ``--json``, a list of key paths, values and sources). Return 0; a
    pod the inventory does not list is a SpecError (one line)."""
    inventory = fleet.load_inventory(record_host_keys=False)
    pod = next((p for p in inventory.pods if p.name == args.pod), None)
    if pod is None:
        names = ", ".join(p.name for p in inventory.pods[:5])
        raise SpecError(f"no pod {args.pod} in the {inventory.source} (it lists {names})")
    values = traced(fleet.layers(pod))
    shipped = f"shipped default (podstate {starter.version()})"
    if args.json:
        rows = [
            {
                "key": list(path),
                "value": value,
                "from": shipped if source == SHIPPED_NAME else source,
            }
            for path, value, source in values
        ]
        print(json.dumps({"pod": pod.name, "values": rows}, indent=2))
        return 0
    lines: list[tuple[str, str]] = []
    before: tuple[str, ...] = ()
    for path, value, source in values:
        differs = (i for i, (a, b) in enumerate(zip(path, before, strict=False)) if a != b)
        start = next(differs, min(len(path) - 1, len(before)))
        for depth in range(start, len(path) - 1):
            lines.append((f"{'  ' * depth}{_key(path[depth])}:", ""))
        text = f"{'  ' * (len(path) - 1)}{_key(path[-1])}: {json.dumps(value, ensure_ascii=False)}"
        lines.append((text, "shipped default" if source == SHIPPED_NAME else source))
        before = path
    width = min(max((len(text) for text, source in lines if source), default=0), 60)
    print(
        f"# {pod.name}'s desired state, and the file of each value (podstate {starter.version()})"
    )
    for text, source in lines:
        print(f"{text:{width}}  # {source}" if source else text)
    return 0


def _key(key: str) -> str:
    """Return ``key`` as YAML reads it back: plain where it can be, else quoted."""
    return key if _PLAIN_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
