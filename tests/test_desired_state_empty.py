"""A desired state whose optional sections are absent, or empty where the schema allows it,
is the same after ``typed.build`` and ``typed.as_data``: the same dict (its keys in the same
order), the same ready marker digest as the dict itself gave before the state was typed,
and the same probe request as the roles asked of the dict (an empty section asks what an
absent one asks, except ``secrets: {}`` and ``authorized_keys: []``, which say "manage it,
with nothing in it")."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from podstate.desired.spec import normalize
from podstate.desired.typed import as_data, build
from podstate.facts.marker import NOT_APPLIED, applies_nothing, digest
from podstate.pod import probe

EMPTY: list[dict[str, Any]] = [
    {},
    {"files": {}},
    {"scratch": {}},
    {"env": {}},
    {"repos": {}},
    {"secrets": {}},
    {"authorized_keys": []},
    {"dirs": {}},
    {"path": []},
    {"gpu": {}},
    {"disk": {}},
    {"packages": {}},
    {"processes": {}},
    {"boot": {}},
    {"nccl": {}},
    {"files": {}, "scratch": {}, "env": {}, "repos": {}, "secrets": {}, "authorized_keys": []},
    {"gpu": {"healthy": False}, "packages": {"apt": [], "remove_undeclared": False}},
]
AS_ABSENT = ("files", "scratch", "env", "repos", "dirs", "path", "processes", "gpu", "disk")


def _untyped_digest(wanted: dict[str, Any]) -> str:
    """The marker's digest as it was computed from the normalized dict itself."""
    applied = {k: v for k, v in wanted.items() if k not in NOT_APPLIED}
    text = json.dumps(applied, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _arguments(raw: dict[str, Any]) -> str:
    request = probe.request(build(normalize(raw, None)))
    return json.dumps(request.arguments(), sort_keys=True, default=repr)


@pytest.mark.parametrize("raw", EMPTY, ids=lambda raw: ",".join(raw) or "none")
def test_an_empty_or_absent_section_round_trips_with_its_digest(raw: dict[str, Any]) -> None:
    normalized = normalize(raw, None)
    typed = build(normalized)
    again = as_data(typed)
    assert again == normalized
    assert json.dumps(again, default=str) == json.dumps(normalized, default=str)  # key order
    assert digest(typed) == _untyped_digest(normalized)
    assert build(again) == typed
    assert applies_nothing(typed) == (not set(normalized) - {*NOT_APPLIED, "disk_reserve"})


@pytest.mark.parametrize("section", AS_ABSENT)
def test_an_empty_section_asks_the_probe_what_an_absent_one_asks(section: str) -> None:
    empty: Any = [] if section == "path" else {}
    assert _arguments({section: empty}) == _arguments({})


@pytest.mark.parametrize("raw", [{"secrets": {}}, {"authorized_keys": []}], ids=str)
def test_empty_secrets_or_keys_still_ask_for_the_file_they_manage(raw: dict[str, Any]) -> None:
    assert _arguments(raw) != _arguments({})
    assert not applies_nothing(build(normalize(raw, None)))
