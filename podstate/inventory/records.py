"""The one record checker every provider's listing goes through: each record's fields are
checked against a table the provider declares (``Field``), one loop reads every record of a
listing (``Checker.parse``), and the pods podstate skips are ``Skipped``, each with its
reason. An error names the record and the field, on one line: ``unexpected <api> response:
pods[3] (id x).ssh.direct.port: expected an integer, got a string``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory.api_http import InventoryError
from podstate.providers import registry

_KINDS = {str: "a string", int: "an integer", dict: "an object", float: "a number"}


@dataclass(frozen=True)
class Skipped:
    """A pod a provider lists that podstate cannot manage, and why."""

    id: str
    name: str
    reason: str
    created_at: str  # when it was made: who keeps a shared name (naming.host_names)
    provider: str = registry.DEFAULT

    @property
    def key(self) -> str:
        """Return the pod's key among every provider's pods: its id on RunPod (the default
        provider, whose ids named pods first), ``<provider>:<id>`` on the others."""
        return self.id if self.provider == registry.DEFAULT else f"{self.provider}:{self.id}"

    def line(self) -> str:
        """Return the one stderr line that reports this pod as skipped."""
        what = registry.pod_provider(self.provider).called
        return f"podstate: skipping {what} {shown(self.id)} ({shown(self.name)}): {self.reason}"


@dataclass(frozen=True)
class Field:
    """One field of a record as the provider's API documents it: a row of the table a
    provider declares.

    ``key`` is its path in the record (``ssh.direct.port``: a field of an object that is
    null or absent is not read); ``kind`` its type (``float``: any number, read as float);
    ``required``: missing is an error; ``nullable``: null is allowed; ``read`` turns a
    present value into what the record holds, raising ValueError with the problem when the
    value cannot be used (``not a date-time: ...``)."""

    key: str
    kind: type = str
    required: bool = True
    nullable: bool = False
    read: Callable[[Any], Any] | None = None


# What a listed record is to its provider's parser, the id and the checked head fields
# given: the pod it can manage, why it is skipped (a string), or None to leave it out.
Reader = Callable[[dict[str, Any], str, str, dict[str, Any]], Any]


@dataclass(frozen=True)
class Checker:
    """Checks the records of one provider's API, whose errors say ``unexpected <api>
    response``.

    ``read``: the fields its parser reads, all that a listing handed on keeps; ``plural``
    and ``one``: what the listing calls its records (``pods``, ``a pod object``); ``ident``:
    the id field, read as text; ``head``: the fields every record has checked, skipped ones
    too; ``named``: a record's name and creation time (RFC 3339) from its id and head;
    ``twice``: why a record whose id another record of the listing has is skipped (once),
    None when such a listing is refused; ``null_is_missing``: a required field that is null
    is said to be missing (Vast's records), rather than of the wrong type (RunPod's)."""

    api: str
    read: tuple[str, ...]
    plural: str
    one: str
    provider: str
    ident: Field
    head: tuple[Field, ...]
    named: Callable[[str, dict[str, Any]], tuple[str, str]]
    twice: str | None = None
    null_is_missing: bool = False

    def unexpected(self, where: str, problem: str) -> InventoryError:
        """Return the error for a record's field ``where`` that is not what the API
        documents: one line naming the record and the field."""
        return InventoryError(f"unexpected {self.api} response: {where}: {problem}")

    def parse(self, raw: list[Any], reader: Reader) -> tuple[list[Any], list[Skipped]]:
        """Return the records of ``raw`` podstate can manage and the ones it skips, in the
        API's order: each record an object with an id (``ident``), its ``head`` checked,
        then what ``reader`` makes of it. InventoryError names the record and the field
        of one that is not what the API documents."""
        pods: list[Any] = []
        skipped: list[Skipped] = []
        twice = self._listed_twice(raw) if self.twice else set()
        seen: set[str] = set()
        for index, item in enumerate(raw):
            where = f"{self.plural}[{index}]"
            if not isinstance(item, dict):
                raise self.unexpected(where, f"expected {self.one}, got {kind_of(item)}")
            ident = self.value(item, where, self.ident)
            if ident in seen and not self.twice:
                again = f"{shown(ident)} is listed twice"
                raise self.unexpected(f"{where}.{self.ident.key}", again)
            where = f"{where} (id {shown(ident)})"
            head = self.fields(item, where, self.head)
            name, created = self.named(ident, head)
            if ident in twice and self.twice:
                if ident not in seen:
                    skipped.append(Skipped(ident, name, self.twice, created, self.provider))
                seen.add(ident)
                continue
            seen.add(ident)
            got = reader(item, where, ident, head)
            if isinstance(got, str):
                skipped.append(Skipped(ident, name, got, created, self.provider))
            elif got is not None:
                pods.append(got)
        return pods, skipped

    def _listed_twice(self, raw: list[Any]) -> set[str]:
        """Return the ids that more than one record of ``raw`` has (the pages shifted while
        they were read, so which record is the pod as it is now cannot be told)."""
        counted: dict[str, int] = {}
        for item in raw:
            try:
                ident = self.value(item, "", self.ident) if isinstance(item, dict) else None
            except InventoryError:  # named where the record is read
                ident = None
            if ident is not None:
                counted[ident] = counted.get(ident, 0) + 1
        return {ident for ident, count in counted.items() if count > 1}

    def fields(self, item: dict[str, Any], where: str, table: Sequence[Field]) -> dict[str, Any]:
        """Return the value of each field of ``table`` in ``item`` by its key, checked in
        the table's order (``value``)."""
        return {row.key: self.value(item, where, row) for row in table}

    def value(self, item: dict[str, Any], where: str, row: Field) -> Any:
        """Return the value of the field ``row`` in ``item`` when it has its type (and its
        ``read``'s result); None when it is missing and not required, null and nullable or
        not required, or a field of an object that is not there; ``unexpected`` otherwise,
        so that a record the parser cannot read is named, never half read."""
        *parents, key = row.key.split(".")
        obj: Any = item
        for part in parents:
            obj = obj.get(part) if isinstance(obj, dict) else None
            where = f"{where}.{part}"
        if not isinstance(obj, dict):
            return None
        value: Any = obj.get(key)
        null = value is None and self.null_is_missing and row.required and not row.nullable
        if key not in obj or null:
            if row.required:
                raise self.unexpected(f"{where}.{key}", "missing")
            return None
        if value is None and (row.nullable or not row.required):
            return None
        number = row.kind is float and isinstance(value, int)
        if not (isinstance(value, row.kind) or number) or isinstance(value, bool):
            expected = _KINDS.get(row.kind, row.kind.__name__) + " or null" * row.nullable
            raise self.unexpected(f"{where}.{key}", f"expected {expected}, got {kind_of(value)}")
        value = float(value) if row.kind is float else value
        try:
            return row.read(value) if row.read else value
        except ValueError as e:
            raise self.unexpected(f"{where}.{key}", str(e)) from None

    def kept(self, raw: list[Any]) -> list[Any]:
        """Return the records of ``raw`` with only the fields the parser reads (``read``):
        what a listing handed to another run holds, so the rest (a pod's environment, a
        template's ``onstart``, which may hold a user's tokens) is never written anywhere."""
        return [
            {k: v for k, v in item.items() if k in self.read} if isinstance(item, dict) else item
            for item in raw
        ]


def shown(text: str) -> str:
    """Return ``text`` safe for one terminal line (JSON-quoted when it is not plain)."""
    if text and text.isprintable() and len(text) <= 100:
        return text
    return json.dumps(text[:100])
