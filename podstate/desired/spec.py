"""The desired state: YAML vars files merged per pod and validated before any connection.

The path a value takes is: vars file -> ``load.load_yaml`` -> ``load.merge`` -> the schema
-> ``normalize`` (the sections' own rules: ``sections``, ``content``) -> host data
``podstate`` -> roles. Every error is one line naming the file and the key (``errors``).
Whether each command the state makes fits in one argument is checked a layer up
(``podstate.pod.fits``, by ``podstate.inventory.fleet.resolve``), where the roles that build
the commands are known.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podstate.desired import content, passed, sections
from podstate.desired.errors import Layer, SpecError, located, schema_error
from podstate.desired.load import merge
from podstate.desired.sections import normpath
from podstate.sizes import parse_size

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

SCHEMA = "pod.schema.json"  # in schema/, installed as the package data podstate.schema
# disk_reserve when the desired state names none: room left on the container disk for what
# the desired state puts there (roles/disk.py).
DISK_RESERVE = 2 << 30

_SCHEMA: str | None = None
_VALIDATOR: Draft202012Validator | None = None


def _schema() -> str:
    """Return the pod schema's text, read once."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = files("podstate.schema").joinpath(SCHEMA).read_text()
    return _SCHEMA


def _validator() -> Draft202012Validator:
    """Return the validator of the pod schema, built once: building it takes longer than
    validating a pod's state."""
    global _VALIDATOR
    if _VALIDATOR is None:
        from jsonschema import Draft202012Validator

        _VALIDATOR = Draft202012Validator(json.loads(_schema()))
    return _VALIDATOR


def _schema_errors(state: dict[str, Any]) -> list[ValidationError]:
    """Return what the schema finds wrong with ``state``: none, without jsonschema, for a
    state it passed before (``passed``)."""
    name = passed.name(_schema(), state)
    if name is not None and passed.known(name):
        return []
    errors = list(_validator().iter_errors(state))
    if not errors and name is not None:
        passed.add(name)
    return errors


def resolve(layers: list[Layer], pod: str) -> dict[str, Any]:
    """Return the pod's merged, validated and normalized state; SpecError names file and key."""
    state: dict[str, Any] = {}
    for layer in layers:
        state = merge(state, layer.data)
    errors = _schema_errors(state)
    if errors:
        raise schema_error(layers, min(errors, key=lambda e: len(list(e.absolute_path))), pod)
    root = next((layer.root for layer in layers if layer.root is not None), None)
    try:
        return normalize(state, root)
    except SpecError as e:  # a key that is valid but names something unusable
        raise located(layers, e, pod) from None


def normalize(state: dict[str, Any], root: Path | None = None) -> dict[str, Any]:
    """Return the validated state with sizes in bytes, paths normalized and defaults filled.

    ``disk_reserve`` is always there (2G unless set), since it guards whatever the other
    sections put on the container disk.

    ``root`` is the vars directory that relative file names (``venv.requirements``) are
    read from; files are read here, once, so nothing later needs the control machine's disk.
    A SpecError raised here starts with the key it is about (``venv.requirements: …``).
    """
    sections.refuse_credentials(state)
    out: dict[str, Any] = {
        "disk_reserve": parse_size(state["disk_reserve"])
        if "disk_reserve" in state
        else DISK_RESERVE
    }
    if "scratch" in state:
        given: dict[str, Any] = {}
        for path, item in state["scratch"].items():
            if (normal := normpath(path)) in given:
                raise SpecError(f"scratch: {path} is {normal} again: name each path once")
            given[normal] = item
        out["scratch"] = {
            path: {
                "size": parse_size(given[path]["size"]),
                "mode": format(int(given[path].get("mode", "1777"), 8), "o"),  # as stat reads
            }
            for path in sections.parents_first(list(given))
        }
    if "dirs" in state:
        out["dirs"] = {name: normpath(path) for name, path in state["dirs"].items()}
    if "env" in state:
        out["env"] = dict(state["env"])
    if "path" in state:
        out["path"] = [normpath(path) for path in state["path"]]
    if "shm" in state:
        out["shm"] = {"min_size": parse_size(state["shm"]["min_size"])}
    if "nccl" in state:
        out["nccl"] = {
            "p2p": state["nccl"].get("p2p", "auto"),
            "ib": state["nccl"].get("ib", "auto"),
        }
    if "gpu" in state:
        out["gpu"] = dict(state["gpu"])
        if "min_memory" in out["gpu"]:
            out["gpu"]["min_memory"] = parse_size(out["gpu"]["min_memory"])
    if "disk" in state:
        out["disk"] = {
            "min_free": {
                normpath(path): parse_size(size)
                for path, size in (state["disk"].get("min_free") or {}).items()
            }
        }
    if "download" in state:
        out["download"] = {"seconds": 5, **state["download"]}
    if "venv" in state:
        out["venv"] = content.venv(state["venv"], root or Path.cwd())
    if "packages" in state:
        out["packages"] = {"apt": list(dict.fromkeys(state["packages"].get("apt") or []))}
        if state["packages"].get("remove_undeclared"):
            out["packages"]["remove_undeclared"] = True
    if "files" in state:
        out["files"] = content.files(state["files"], root or Path.cwd())
    if "authorized_keys" in state:
        out["authorized_keys"] = content.authorized_keys(state["authorized_keys"])
    if "repos" in state:
        out["repos"] = sections.repos(state["repos"], root)
    if "secrets" in state:
        out["secrets"] = sections.secrets(state["secrets"], root, state)
    if "boot" in state:
        out["boot"] = sections.boot(state["boot"])
    if "processes" in state:
        out["processes"] = sections.processes(state["processes"])
    if "waivers" in state:
        out["waivers"] = [sections.waiver(i, item) for i, item in enumerate(state["waivers"])]
    if "idle" in state:  # read by podstate watch only, no role
        out["idle"] = sections.idle(state["idle"])
    if "watch" in state:  # read by podstate watch only, no role
        out["watch"] = {"hold": bool(state["watch"].get("hold", False))}
    return out
