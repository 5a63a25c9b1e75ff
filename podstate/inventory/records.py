"""What every provider's record checker shares: the pods a provider lists that podstate
skips (``Skipped``), one field of a record checked for type (``Checker.field``), the error
that names the record and the field, and the records as a listing handed on keeps them
(``Checker.kept``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from podstate.desired.errors import kind_of
from podstate.inventory.api_http import InventoryError
from podstate.providers import registry

_KINDS = {str: "a string", int: "an integer", dict: "an object"}


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
class Checker:
    """Checks the records of one provider's API; its errors say ``unexpected <api>
    response``. ``null_is_missing``: a required field that is null is said to be missing
    (Vast's records), rather than of the wrong type (RunPod's)."""

    api: str
    read: tuple[str, ...]  # the fields the parser reads: all a listing handed on keeps
    null_is_missing: bool = False

    def unexpected(self, where: str, problem: str) -> InventoryError:
        """Return the error for a record's field ``where`` that is not what the API
        documents: one line naming the record and the field."""
        return InventoryError(f"unexpected {self.api} response: {where}: {problem}")

    def field(
        self,
        obj: dict[str, Any],
        key: str,
        where: str,
        kind: type,
        required: bool = True,
        nullable: bool = False,
    ) -> Any:
        """Return ``obj[key]`` when it has type ``kind``; None when it is missing and not
        ``required``, or null and ``nullable`` or not required; ``unexpected`` otherwise, so
        that a record the parser cannot read is named, never half read."""
        value = obj.get(key)
        null_missing = value is None and self.null_is_missing and required and not nullable
        if key not in obj or null_missing:
            if required:
                raise self.unexpected(f"{where}.{key}", "missing")
            return None
        if value is None and (nullable or not required):
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            expected = _KINDS.get(kind, kind.__name__) + (" or null" if nullable else "")
            raise self.unexpected(f"{where}.{key}", f"expected {expected}, got {kind_of(value)}")
        return value

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
