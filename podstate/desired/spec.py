"""The desired state: YAML vars files merged per pod and validated before any connection.

The path a value takes is: vars file -> ``load_yaml`` -> ``merge`` -> ``validate`` ->
``normalize`` -> host data ``podstate`` -> roles.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import posixpath
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from podstate.desired import secret
from podstate.desired.secret import Secret
from podstate.limits import MAX_FILE
from podstate.paths import ENV_FILES
from podstate.sizes import parse_size

SCHEMA = "pod.schema.json"  # in schema/, installed as the package data podstate.schema
# disk_reserve when the desired state names none: room left on the container disk for what
# the desired state puts there (roles/disk.py).
DISK_RESERVE = 2 << 30


class SpecError(Exception):
    """A problem with the user's files, worded as one line that says what to fix."""


# Bytes podstate reads at most of a file of yours it reads whole: a vars, pods or groups
# file, a requirements file.
READ_MAX = 1 << 20
# Values that YAML aliases may add to a file, all uses together: far more than anchors for
# shared settings need, and what stops a few hundred bytes from expanding to billions.
ALIAS_VALUES = 10_000


class _Refused(yaml.YAMLError):
    """Well-formed YAML that podstate refuses: its message says where and what to do."""


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, with dates left as the text they are (``until: 2026-12-31``),
    each key once in a mapping, and aliases that expand to at most ``ALIAS_VALUES`` values.

    What an alias expands to is counted as the document is composed, from the size of the
    value it names, so a refusal costs no more than reading the file.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}  # id(node) -> values it holds, aliases expanded
        self._added = 0  # values added by aliases so far

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """Return the next node, counting what an alias adds and refusing a key twice."""
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            line = event.start_mark.line + 1
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:
                raise _Refused(
                    f"line {line}: alias *{event.anchor} is inside the value it names, which "
                    "would hold itself for ever: write the value out"
                )
            self._added += self._sizes[id(node)]
            if self._added > ALIAS_VALUES:
                raise _Refused(
                    f"line {line}: aliases expand to more than {ALIAS_VALUES} values; "
                    "write the values out, or use fewer aliases"
                )
            return node
        node = super().compose_node(parent, index)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            _check_keys(node.value)
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        self._sizes[id(node)] = 1 + sum(self._sizes[id(child)] for child in children)
        return node


def _check_keys(pairs: list[tuple[yaml.Node, yaml.Node]]) -> None:
    """Refuse a mapping that has the same key twice, of which YAML would keep the last one
    silently. The values a merge key brings in (``<<: *defaults``) are not keys of the
    mapping itself: overriding them is what a merge is for."""
    lines: dict[tuple[str, str], int] = {}
    for key, _ in pairs:
        if not isinstance(key, yaml.ScalarNode):
            continue  # a key that is no string: refused once the document is built
        line = key.start_mark.line + 1
        first = lines.get((key.tag, key.value))
        if first is not None:
            where = f"lines {first} and {line}" if first != line else f"both on line {line}"
            raise _Refused(f"key {key_text([key.value])} appears twice ({where}): keep one")
        lines[key.tag, key.value] = line


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
WAIVER_DAYS = 90  # the longest a waiver may run: review them at least quarterly


def load_yaml(path: Path, display: str | None = None) -> dict[str, Any]:
    """Return the mapping in a YAML file ({} for an empty file); SpecError for anything else."""
    shown = display or str(path)
    try:
        text = read_bounded(path, READ_MAX).decode("utf-8")
    except TooLarge as e:
        raise SpecError(
            f"{shown}: {e.size} bytes, more than the {READ_MAX} podstate reads of a YAML "
            "file: is it the right file? Keep large content in files of its own "
            "(files.src, venv.requirements)"
        ) from None
    except OSError as e:
        raise SpecError(f"{shown}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{shown}: not UTF-8 text") from None
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except _Refused as e:
        raise SpecError(f"{shown}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{shown}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise SpecError(f"{shown}: invalid YAML: nested too deeply") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"{shown}: expected a mapping of keys at the top, got {kind_of(data)}")
    _check_tree(data, [], shown)
    return data


class TooLarge(Exception):
    """A file holds more bytes than podstate reads of it: ``size``, or at least that many
    where the file does not tell its size (a file in /proc)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def read_bounded(path: Path, limit: int) -> bytes:
    """Return the content of the regular file ``path``, which is never read past ``limit``
    bytes: TooLarge when it holds more (its size is looked at first, so a large file is
    refused without reading it). OSError when it cannot be opened, or is no regular file
    (reading a FIFO would wait for ever)."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, "not a regular file")
        if info.st_size > limit:
            raise TooLarge(info.st_size)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(len(data))
    return data


def _check_tree(node: Any, where: list[str], shown: str) -> None:
    """Refuse what JSON cannot hold: non-string keys, absurd nesting. (The loader refuses
    an alias inside the value it names, and bounds what aliases expand to, so this walk
    ends, and soon.)"""
    if not isinstance(node, (dict, list)):
        return
    here = key_text(where)
    if len(where) > 32:
        raise SpecError(f"{shown}: {here}: nested too deeply")
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        if isinstance(node, dict) and not isinstance(key, str):
            raise SpecError(f"{shown}: {here}: key {_short(key)} must be a string")
        _check_tree(value, [*where, str(key)], shown)


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` deep-merged with ``override``: mappings merge, everything else replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass
class Layer:
    """One vars file's contribution to a pod's state, remembered so errors can name the file."""

    display: str
    data: dict[str, Any]
    root: Path | None = None  # the vars directory the file belongs to


@dataclass
class VarsDir:
    """The vars directory (group_vars/, host_vars/), each file read at most once."""

    root: Path
    _cache: dict[Path, dict[str, Any]] = field(default_factory=dict)

    def layers(self, groups: Iterable[str], pod: str) -> list[Layer]:
        """Return the layers for a pod in merge order: all, each group, then the pod itself."""
        files = [self.root / "group_vars" / f"{g}.yaml" for g in ("all", *groups)]
        files.append(self.root / "host_vars" / f"{pod}.yaml")
        layers = []
        for path in files:
            if path.is_file():
                if path not in self._cache:
                    self._cache[path] = load_yaml(path, display_path(path))
                layers.append(Layer(display_path(path), self._cache[path], self.root))
        return layers


def display_path(path: Path) -> str:
    """Return ``path`` relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


_VALIDATOR: Draft202012Validator | None = None


def _validator() -> Draft202012Validator:
    global _VALIDATOR
    if _VALIDATOR is None:
        schema = json.loads(files("podstate.schema").joinpath(SCHEMA).read_text())
        _VALIDATOR = Draft202012Validator(schema)
    return _VALIDATOR


def resolve(layers: list[Layer], pod: str) -> dict[str, Any]:
    """Return the pod's merged, validated and normalized state; SpecError names file and key."""
    state: dict[str, Any] = {}
    for layer in layers:
        state = merge(state, layer.data)
    errors = list(_validator().iter_errors(state))
    if errors:
        error = min(errors, key=lambda e: len(list(e.absolute_path)))
        key_path = list(error.absolute_path)
        source = _source(layers, key_path, error)
        raise SpecError(f"{source}: {_key_text(key_path, error)}: {_message(error)} (pod {pod})")
    root = next((layer.root for layer in layers if layer.root is not None), None)
    from podstate.pod import fits

    try:
        normal = normalize(state, root)
        fits.check(normal)  # every command it makes fits in one argument
    except SpecError as e:  # a key that is valid but names something unusable
        key_path = str(e).split(":", 1)[0].split(".")
        raise SpecError(f"{_setter(layers, key_path)}: {e} (pod {pod})") from None
    return normal


def _setter(layers: list[Layer], key_path: list[str]) -> str:
    """Return the last file that sets ``key_path``."""
    for layer in reversed(layers):
        node: Any = layer.data
        for key in key_path:
            node = node.get(key, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            return layer.display
    return layers[-1].display if layers else "desired state"


def _source(layers: list[Layer], key_path: list[Any], error: ValidationError) -> str:
    """Return the file that last set the deepest part of ``key_path`` that exists."""
    if error.validator == "additionalProperties":
        key_path = key_path + [_offending_key(error)]
    for depth in range(len(key_path), -1, -1):
        for layer in reversed(layers):
            node: Any = layer.data
            for key in key_path[:depth]:
                node = node.get(key, _MISSING) if isinstance(node, dict) else _MISSING
            if node is not _MISSING:
                return layer.display
    return layers[-1].display if layers else "desired state"


_MISSING = object()


def _offending_key(error: ValidationError) -> str:
    """Return the first key that ``additionalProperties`` rejected."""
    extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
    return extra[0] if extra else ""


def key_text(key_path: list[Any]) -> str:
    """Return a key path as ``a.b.c`` on one line; keys with odd characters are quoted."""
    parts = [k if isinstance(k, str) and k.isprintable() else repr(k) for k in key_path]
    return ".".join(str(p) for p in parts) or "(top level)"


def _key_text(key_path: list[Any], error: ValidationError) -> str:
    # An unknown key under a secret could be a token pasted as a key ({hf_…}): not named.
    if error.validator == "additionalProperties" and not error.schema.get("x-hide"):
        key_path = key_path + [_offending_key(error)]
    return key_text(key_path)


def _message(error: ValidationError) -> str:
    """Return what is wrong, in words. Under a schema marked ``x-hide`` (a secret's source)
    it never holds the value, nor jsonschema's own message, which would quote it."""
    schema = error.schema
    if error.validator in ("minProperties", "maxProperties") and schema.get("x-hide"):
        only = "only " if error.validator == "maxProperties" else ""
        return f"give {only}one of: {', '.join(sorted(schema.get('properties', {})))}"
    if error.validator == "additionalProperties":
        allowed = ", ".join(sorted(schema.get("properties", {})))
        return f"unknown key (allowed: {allowed})"
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    if error.validator == "enum":
        return f"{_short(error.instance)} is not one of: {', '.join(map(str, schema['enum']))}"
    if error.validator == "type":
        expected = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in expected)
        return f"expected {names}, got {kind_of(error.instance)}"
    if error.validator == "maxLength":
        return f"is longer than {schema['maxLength']} characters"
    if error.validator == "maxItems":
        return f"has more than {schema['maxItems']} entries"
    if error.validator == "pattern" and "x-message" in schema:
        # a secret's source is never quoted, nor a URL's credential
        shown = "the value" if schema.get("x-hide") else _short(secret.masked(error.instance))
        return f"{shown} {schema['x-message']}"
    if schema.get("x-hide"):
        return f"is not valid here ({error.validator})"
    return error.message


_TYPE_NAMES = {
    "object": "a mapping",
    "string": "a string",
    "integer": "an integer",
    "array": "a list",
    "boolean": "true or false",
}


def kind_of(value: Any) -> str:
    """Return what ``value`` is, in words for an error message ('an integer', 'a list')."""
    for kind, name in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "a mapping"),
    ):
        if isinstance(value, kind):
            return name
    return "nothing" if value is None else type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def normpath(path: str) -> str:
    """Return an absolute POSIX path without ``.``/``..``/``//`` parts."""
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/")


def normalize(state: dict[str, Any], root: Path | None = None) -> dict[str, Any]:
    """Return the validated state with sizes in bytes, paths normalized and defaults filled.

    ``disk_reserve`` is always there (2G unless set), since it guards whatever the other
    sections put on the container disk.

    ``root`` is the vars directory that relative file names (``venv.requirements``) are
    read from; files are read here, once, so nothing later needs the control machine's disk.
    A SpecError raised here starts with the key it is about (``venv.requirements: …``).
    """
    _refuse_credentials(state)
    out: dict[str, Any] = {
        "disk_reserve": parse_size(state["disk_reserve"])
        if "disk_reserve" in state
        else DISK_RESERVE
    }
    if "scratch" in state:
        out["scratch"] = {
            normpath(path): {"size": parse_size(item["size"]), "mode": item.get("mode", "1777")}
            for path, item in state["scratch"].items()
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
        out["venv"] = _venv(state["venv"], root or Path.cwd())
    if "packages" in state:
        out["packages"] = {"apt": list(dict.fromkeys(state["packages"].get("apt") or []))}
    if "files" in state:
        out["files"] = _files(state["files"], root or Path.cwd())
    if "authorized_keys" in state:
        out["authorized_keys"] = _authorized_keys(state["authorized_keys"])
    if "repos" in state:
        out["repos"] = _repos(state["repos"], root)
    if "secrets" in state:
        out["secrets"] = _secrets(state["secrets"], root, state)
    if "boot" in state:
        out["boot"] = _boot(state["boot"])
    if "waivers" in state:
        out["waivers"] = [_waiver(i, item) for i, item in enumerate(state["waivers"])]
    if "watch" in state:  # read by podstate watch only, no role
        out["watch"] = {"hold": bool(state["watch"].get("hold", False))}
    return out


def _boot(item: dict[str, Any]) -> dict[str, Any]:
    """Return the ``boot`` section with its defaults: no hook, new host keys, the volume at
    /workspace. Kept host keys need the hook, which is what puts them back."""
    boot = {
        "hook": bool(item.get("hook", False)),
        "host_keys": item.get("host_keys", "new"),
        "volume": normpath(item.get("volume", "/workspace")),
    }
    if boot["host_keys"] == "keep" and not boot["hook"]:
        raise SpecError(
            "boot.host_keys: keep needs boot.hook: true, since the hook is what puts the keys "
            "back at a container start"
        )
    if boot["volume"] == "/":
        raise SpecError("boot.volume: must name the volume's mount point, such as /workspace")
    return boot


def _secret(key: str, source: dict[str, str], root: Path | None) -> Secret:
    """Return the secret ``source`` names, read now; SpecError names ``key``, never the
    variable, the file or the value."""
    try:
        return secret.read(key, source, root)
    except secret.SecretError as e:
        raise SpecError(str(e)) from None


CREDENTIAL = (
    "the URL holds a credential (a token or password before @), which podstate would show "
    "in its output and pass on command lines: "
)
CREDENTIAL_FIX = {
    "repos": "use a git@host:org/repo URL with ssh_key (a deploy key); keep tokens in secrets",
    "venv": "use an index or URL the pod reaches without one",
    "download": "use a URL that needs none",
}


def _refuse_credentials(state: dict[str, Any]) -> None:
    """Raise SpecError, naming the key and never the URL, for a URL with a credential in
    it (``secret.has_credential``): in ``repos``, ``download`` or ``venv``'s index options
    and packages. ``git@host:org/repo`` and ``ssh://git@host/…`` name only an SSH user."""
    urls = [(f"repos.{path}.url", item["url"]) for path, item in state.get("repos", {}).items()]
    if "download" in state:
        urls.append(("download.url", state["download"]["url"]))
    venv = state.get("venv", {})
    if "index_url" in venv:
        urls.append(("venv.index_url", venv["index_url"]))
    for key in ("extra_index_urls", "find_links", "packages"):
        for number, text in enumerate(venv.get(key, []), start=1):
            urls.append((f"venv.{key}: entry {number}", text))
    for key, text in urls:
        if secret.has_credential(text):
            raise SpecError(f"{key}: {CREDENTIAL}{CREDENTIAL_FIX[key.split('.', 1)[0]]}")


def _repos(items: dict[str, dict[str, Any]], root: Path | None) -> dict[str, dict[str, Any]]:
    """Return the ``repos`` section: path -> ``url``, ``ref`` and ``ssh_key`` (a Secret or
    None), with every deploy key read now."""
    out = {}
    for name, item in items.items():
        path = normpath(name)
        if path == "/":
            raise SpecError(f"repos.{name}: must name a directory below /, such as /root/code/x")
        key = item.get("ssh_key")
        out[path] = {
            "url": item["url"],
            "ref": item["ref"],
            "ssh_key": _secret(f"repos.{name}.ssh_key", key, root) if key else None,
        }
    return out


def _secrets(
    items: dict[str, dict[str, str]], root: Path | None, state: dict[str, Any]
) -> dict[str, Secret]:
    """Return the ``secrets`` section: name -> Secret, every value read now. A name also
    set by ``env`` or ``dirs`` is a SpecError: a variable has one source."""
    for name in items:
        for other in ("env", "dirs"):
            if name in (state.get(other) or {}):
                raise SpecError(f"secrets.{name}: {name} is in {other} too; set it in one place")
    return {name: _secret(f"secrets.{name}", source, root) for name, source in items.items()}


def _waiver(index: int, item: dict[str, str]) -> dict[str, Any]:
    """Return a waiver with its ``until`` as a date, at most WAIVER_DAYS ahead."""
    until = datetime.date.fromisoformat(item["until"])
    if until > datetime.date.today() + datetime.timedelta(days=WAIVER_DAYS):
        raise SpecError(
            f"waivers.{index}.until: {until} is more than {WAIVER_DAYS} days ahead: waivers "
            "are for known problems being fixed; review it within a quarter"
        )
    return {**item, "until": until}


REQUIREMENTS_INCLUDES = ("-r", "--requirement", "-c", "--constraint")


def _venv(item: dict[str, Any], root: Path) -> dict[str, Any]:
    """Return the normalized ``venv`` section, with the requirements file's content in it."""
    path = normpath(item["path"])
    if path == "/":
        raise SpecError("venv.path: must name a directory below /, such as /opt/venv")
    requirements = None
    if "requirements" in item:
        requirements = _requirements(root / item["requirements"], item["requirements"])
    snapshot = normpath(item["snapshot"]) if "snapshot" in item else None
    if snapshot and (snapshot == path or snapshot.startswith(path + "/")):
        raise SpecError(f"venv.snapshot: {snapshot} is inside venv.path {path}")
    return {
        "path": path,
        "python": item.get("python", "python3"),
        "packages": [" ".join(p.split()) for p in item.get("packages", [])],
        "requirements": requirements,
        "requirements_file": item.get("requirements"),
        "installer": item.get("installer", "uv"),
        "index_url": item.get("index_url"),
        "extra_index_urls": list(item.get("extra_index_urls", [])),
        "find_links": [
            normpath(link) if link.startswith("/") else link for link in item.get("find_links", [])
        ],
        "no_index": bool(item.get("no_index", False)),
        "snapshot": snapshot,
        "seed": bool(item.get("seed", True)),
        "compile": bool(item.get("compile", True)),
    }


def _requirements(path: Path, name: str) -> str:
    """Return a requirements file's text; SpecError for what the installer could not use."""
    try:
        text = read_bounded(path, READ_MAX).decode("utf-8")
    except TooLarge as e:
        raise SpecError(
            f"venv.requirements: {name}: {e.size} bytes, more than the {READ_MAX} podstate "
            "reads of a requirements file: is it the right file?"
        ) from None
    except OSError as e:
        raise SpecError(
            f"venv.requirements: cannot read {name} ({display_path(path)}): {e.strerror or e}"
        ) from None
    except UnicodeDecodeError:
        raise SpecError(f"venv.requirements: {name} is not UTF-8 text") from None
    for number, line in enumerate(text.splitlines(), start=1):
        option = line.strip().split("=", 1)[0].split(" ", 1)[0]
        if option in REQUIREMENTS_INCLUDES:
            raise SpecError(
                f"venv.requirements: {name} line {number}: {option} names another file, which "
                "the pod does not have; put its lines in this file or in venv.packages"
            )
        if "\0" in line:
            raise SpecError(f"venv.requirements: {name} line {number}: contains a NUL byte")
        if secret.has_credential(line):
            raise SpecError(
                f"venv.requirements: {name} line {number}: {CREDENTIAL}{CREDENTIAL_FIX['venv']}"
            )
    return text


def _files(items: dict[str, dict[str, str]], root: Path) -> dict[str, dict[str, str]]:
    """Return the ``files`` section: path -> ``content`` (a ``src`` read here, byte for byte)
    and ``mode`` as ``stat`` prints it ("644"). A SpecError names the path and the problem."""

    out = {}
    for name, item in items.items():
        path = normpath(name)
        if path in [normpath(p.replace("~", "/root", 1)) for p in ENV_FILES]:
            raise SpecError(
                f"files: {path}: podstate keeps its environment hook there; put your lines in "
                "a file of their own"
            )
        if ("content" in item) == ("src" in item):
            raise SpecError(f"files: {path}: give either content or src (a file to copy)")
        try:
            content = item.get("content")
            if content is None:
                content = _read_src(root / item["src"], item["src"], path, MAX_FILE)
            size = len(content.encode("utf-8", "surrogateescape"))
            if size > MAX_FILE:
                raise TooLarge(size)
        except TooLarge as e:
            raise SpecError(
                f"files: {path}: {e.size} bytes, more than the {MAX_FILE} podstate writes in "
                "one command; put big files on the volume"
            ) from None
        out[path] = {"content": content, "mode": format(int(item.get("mode", "0644"), 8), "o")}
    return out


def _read_src(source: Path, name: str, path: str, limit: int) -> str:
    """Return the content of ``files.<path>.src`` (``source``, named ``name``), byte for byte;
    TooLarge, before reading it, past ``limit`` bytes."""
    try:
        return read_bounded(source, limit).decode("utf-8", "surrogateescape")
    except OSError as e:
        raise SpecError(
            f"files: {path}: cannot read src {name} ({display_path(source)}): {e.strerror or e}"
        ) from None


def _authorized_keys(lines: list[str]) -> list[str]:
    """Return the ``authorized_keys`` lines with single spaces, each key once; SpecError when
    a key's data is not base64 of a key of the type its line names (a key pasted whole
    always is; a cut or mixed-up one is not)."""
    keys: dict[tuple[str, str], str] = {}
    for number, line in enumerate(lines, start=1):
        kind, data, *comment = line.split()
        try:
            blob = base64.b64decode(data, validate=True)
            length = int.from_bytes(blob[:4], "big")
            inner = blob[4 : 4 + length].decode("ascii")
        except (ValueError, UnicodeDecodeError):
            inner = ""
        if inner != kind:
            said = f"data of a {inner} key" if inner.isprintable() and inner else "no key data"
            raise SpecError(
                f"authorized_keys: entry {number} ({_short(' '.join(comment) or data[:20])}) "
                f"says {kind} but holds {said}: paste the whole .pub line"
            )
        keys.setdefault((kind, data), " ".join([kind, data, *comment]))
    return list(keys.values())


def desired(data: dict[str, Any], source: str = "a deploy file") -> dict[str, Any]:
    """Return ``data`` as a validated, normalized desired state, as roles take it.

    For a team's own deploy file calling a podstate role with its own arguments (a second
    venv); relative file names are read from the working directory. Raises SpecError, one
    line naming ``source`` and the key, for what the schema refuses.
    """
    return resolve([Layer(source, data, Path.cwd())], "any")
