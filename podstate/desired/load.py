"""Reading your YAML files safely, and merging them into a pod's layers.

A vars, pods or groups file is read whole but bounded (``READ_MAX``), each key once, with
aliases that cannot expand past ``ALIAS_VALUES``; what JSON cannot hold is refused. Every
refusal is one SpecError naming the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from podstate.desired.errors import Layer, SpecError, Written, key_text, kind_of, short

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

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """Return the next node, counting what an alias adds and refusing a key twice."""
        if self.check_event(yaml.AliasEvent):
            peek: Callable[[], yaml.AliasEvent] = self.peek_event  # untyped in PyYAML's stubs
            event = peek()
            line = event.start_mark.line + 1 if event.start_mark else "?"
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


def load_yaml(path: Path, display: str | None = None) -> dict[str, Any]:
    """Return the mapping in a YAML file ({} for an empty file); SpecError for anything else."""
    return load_written(path, display)[0]


def load_written(path: Path, display: str | None = None) -> tuple[dict[str, Any], Written]:
    """Return ``load_yaml``'s mapping and, by key path, the text as written of each value
    that YAML read as no string (``off`` read as false, ``1`` as an integer): so that an
    error about such a value can name it as the user wrote it, and say to quote it."""
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
        node, data = _parse(text)
    except _Refused as e:
        raise SpecError(f"{shown}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{shown}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise SpecError(f"{shown}: invalid YAML: nested too deeply") from None
    if node is None or data is None:  # an empty document
        return {}, {}
    if not isinstance(data, dict):
        raise SpecError(f"{shown}: expected a mapping of keys at the top, got {kind_of(data)}")
    _check_tree(data, [], shown)
    written: Written = {}
    _note_written(node, (), written)
    return data, written


def _parse(text: str) -> tuple[yaml.Node | None, Any]:
    """Return the document's node and what it holds, as ``yaml.load`` with ``_Loader`` (a
    SafeLoader) would, keeping the node: it holds the text of each value as written."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        return node, None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


# Tags of the values YAML reads from plain words and numbers as no string.
_NOT_TEXT = {f"tag:yaml.org,2002:{tag}" for tag in ("bool", "int", "float", "null")}


def _note_written(node: yaml.Node, where: tuple[str | int, ...], written: Written) -> None:
    """Add to ``written`` the text of each scalar under ``node`` that YAML read as no string,
    by its key path. (Merge keys are already folded into their mappings, and the tree is
    known to be shallow and bounded: ``load_written`` checked it first.)"""
    if isinstance(node, yaml.ScalarNode):
        if node.tag in _NOT_TEXT and node.value:
            written[where] = node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _note_written(value, (*where, key.value), written)
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            _note_written(value, (*where, index), written)


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
            raise SpecError(f"{shown}: {here}: key {short(key)} must be a string")
        _check_tree(value, [*where, str(key)], shown)


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` deep-merged with ``override``: mappings merge, a null removes the key
    (how a vars file drops a shipped default: ``scratch: {/scratch: null}``), everything
    else replaces."""
    merged = dict(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict):  # merged into an empty one too: its nulls drop
            merged[key] = merge(merged[key] if isinstance(merged.get(key), dict) else {}, value)
        else:
            merged[key] = value
    return merged


SPELLINGS = (".yaml", ".yml")  # a vars file's name ends in either, as Ansible reads them


def spelled(stem: Path) -> Path | None:
    """Return the file ``stem`` names with ``.yaml`` or ``.yml`` added, None when neither
    is there; SpecError when both are, since which one is meant cannot be known."""
    found = [stem.with_name(stem.name + end) for end in SPELLINGS]
    found = [path for path in found if path.is_file()]
    if len(found) > 1:
        raise SpecError(
            f"{display_path(found[0])} and {found[1].name} are both there: they are one file "
            "in two spellings; keep one"
        )
    return found[0] if found else None


# The shipped defaults' file, in the package podstate.desired, and how errors and
# ``podstate show`` name it.
SHIPPED = "defaults.yaml"
SHIPPED_NAME = "podstate's shipped defaults"
_SHIPPED: list[Layer] = []


def shipped() -> Layer:
    """Return the layer of podstate's shipped defaults (defaults.yaml, package data), read
    once: the first layer of every pod's state, so that a key no vars file sets takes the
    installed version's default, and a new default reaches pods without an edit."""
    if not _SHIPPED:
        path = Path(str(files("podstate.desired").joinpath(SHIPPED)))
        data, written = load_written(path, SHIPPED_NAME)
        _SHIPPED.append(Layer(SHIPPED_NAME, data, None, written))
    return _SHIPPED[0]


@dataclass
class VarsDir:
    """The vars directory (group_vars/, host_vars/), each file read at most once."""

    root: Path
    _cache: dict[Path, tuple[dict[str, Any], Written]] = field(default_factory=dict)

    def check(self) -> None:
        """Raise SpecError when the directory holds no vars file (group_vars/*.yaml or
        host_vars/*.yaml, or .yml), or one in both spellings: with a wrong PODSTATE_VARS,
        every pod would otherwise take the shipped defaults alone, none of the user's state."""
        found: list[Path] = []
        for sub in ("group_vars", "host_vars"):
            folder = self.root / sub
            names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
            stems = {n.removesuffix(e) for n in names for e in SPELLINGS if n.endswith(e)}
            found += [p for stem in sorted(stems) if (p := spelled(folder / stem))]
        if not found:
            shown = display_path(self.root)
            inside = [f"all{end}" for end in SPELLINGS if (self.root / f"all{end}").is_file()]
            hint = f"; it holds {inside[0]}: is it group_vars/ itself?" if inside else ""
            raise SpecError(
                f"{shown}: no vars file in it (looked for group_vars/*.yaml and "
                f"host_vars/*.yaml, or .yml): set PODSTATE_VARS to the directory that holds "
                f"group_vars/{hint}"
            )

    def layers(self, groups: Iterable[str], pod: str) -> list[Layer]:
        """Return the layers for a pod in merge order: podstate's shipped defaults
        (``shipped``), all, each group, then the pod itself."""
        stems = [self.root / "group_vars" / g for g in ("all", *groups)]
        stems.append(self.root / "host_vars" / pod)
        layers = [shipped()]
        for stem in stems:
            path = spelled(stem)
            if path is not None:
                if path not in self._cache:
                    self._cache[path] = load_written(path, display_path(path))
                data, written = self._cache[path]
                layers.append(Layer(display_path(path), data, self.root, written))
        return layers


def display_path(path: Path) -> str:
    """Return ``path`` relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
