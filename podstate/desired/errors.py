"""SpecError, and the wording that names the file and the key of what is wrong.

A pod's state is merged from layers (one per vars file); an error is worded from the layer
that sets the key it is about, so the user reads which file to fix and where.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podstate.desired import secret

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError


class SpecError(Exception):
    """A problem with the user's files, worded as one line that says what to fix."""


# By key path, the text as written of each value YAML read as no string (``off``: false).
Written = dict[tuple[str | int, ...], str]


@dataclass
class Layer:
    """One vars file's contribution to a pod's state, remembered so errors can name the file
    and a value as it was written."""

    display: str
    data: dict[str, Any]
    root: Path | None = None  # the vars directory the file belongs to
    written: Written = field(default_factory=dict)


def schema_error(layers: list[Layer], error: ValidationError, pod: str) -> SpecError:
    """Return the SpecError for what the schema refused in the merged state of ``layers``:
    one line with the file that set the key, the key and what is wrong, for pod ``pod``."""
    key_path = list(error.absolute_path)
    source = _source(layers, key_path, error)
    message = _read_as(error, _written(layers, key_path)) or _message(error)
    return SpecError(f"{source}: {_key_text(key_path, error)}: {message} (pod {pod})")


def _written(layers: list[Layer], key_path: list[Any]) -> str | None:
    """Return the text as written of the value at ``key_path`` in the last layer that sets
    it, where YAML read that text as no string; else None."""
    for layer in reversed(layers):
        node: Any = layer.data
        for key in key_path:
            node = node[key] if isinstance(node, (dict, list)) and _has(node, key) else _MISSING
        if node is not _MISSING:
            return layer.written.get(tuple(key_path))
    return None


def _has(node: dict[str, Any] | list[Any], key: Any) -> bool:
    if isinstance(node, dict):
        return key in node
    return isinstance(key, int) and 0 <= key < len(node)


def _read_as(error: ValidationError, written: str | None) -> str | None:
    """Return the message for a value YAML read as no string where a string would do
    (``p2p: off``, read as false; ``A: 1``, an integer), naming it as ``written`` and saying
    to quote it; None for anything else, and under ``x-hide`` (a secret's source)."""
    schema = error.schema
    if written is None or isinstance(error.instance, str) or schema.get("x-hide"):
        return None
    if error.validator == "enum" and any(isinstance(v, str) for v in schema["enum"]):
        wrong = f"{written} is not one of: {', '.join(map(str, schema['enum']))}"
    elif error.validator == "type" and "string" in (
        schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    ):
        wrong = f"{written} {schema['x-message']}" if "x-message" in schema else _message(error)
    else:
        return None
    value = error.instance
    kind = str(value).lower() if isinstance(value, bool) else kind_of(value)
    return f"{wrong}; YAML read {written} as {kind}: quote it"


def located(layers: list[Layer], error: SpecError, pod: str) -> SpecError:
    """Return ``error`` (a key that is valid but names something unusable; its message starts
    with the key, ``venv.requirements: …``) with the file of ``layers`` that sets the key
    before it and pod ``pod`` after it, so that the line says which file to fix."""
    key_path = str(error).split(":", 1)[0].split(".")
    return SpecError(f"{_setter(layers, key_path)}: {error} (pod {pod})")


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
        return str(error.message).replace("is a required property", "is required")
    if error.validator == "enum":
        return f"{short(error.instance)} is not one of: {', '.join(map(str, schema['enum']))}"
    scalar = not isinstance(error.instance, (dict, list))
    if error.validator == "type" and "x-message" in schema and scalar and not schema.get("x-hide"):
        return f"{short(error.instance)} {schema['x-message']}"  # its hint: quote numbers: "1"
    if error.validator == "type":
        expected: list[str] = (
            schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        )
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in expected)
        return f"expected {names}, got {kind_of(error.instance)}"
    if error.validator == "maxLength":
        return f"is longer than {schema['maxLength']} characters"
    if error.validator == "maxItems":
        return f"has more than {schema['maxItems']} entries"
    if error.validator == "pattern" and "x-message" in schema:
        # a secret's source is never quoted, nor a URL's credential
        shown = "the value" if schema.get("x-hide") else short(secret.masked(error.instance))
        return f"{shown} {schema['x-message']}"
    if schema.get("x-hide"):
        return f"is not valid here ({error.validator})"
    return str(error.message)


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


def short(value: Any) -> str:
    """Return ``repr(value)``, cut to 60 characters, to quote a value in an error line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
