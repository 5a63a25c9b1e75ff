"""Roles return what they found and did (``findings.Result``), and the pod's findings are
their results, in the order the roles ran: no table keyed by pod name outlives a run.

Each test plans roles on a pyinfra host that is never connected, with a probe read by this
machine's sh from a temporary directory (tests/probing.py), as a pod's would be read.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import Host, Inventory, State
from pyinfra.context import ctx_host, ctx_state

from podstate.desired.state import State as Desired
from podstate.facts.probe import Probe, parse_probe
from podstate.facts.record import DirEntry
from podstate.facts.request import merge
from podstate.roles import disk, files
from podstate.run import findings
from tests import probing
from tests.typed_state import state as desired


def _pod(name: str) -> tuple[State, Host]:
    inventory = typing.cast(Any, Inventory)(([name], {}))  # pyinfra's Inventory is untyped
    (host,) = inventory
    return State(inventory), host


@pytest.fixture
def pod() -> Iterator[Host]:
    """A pod of a run of its own, never connected, as the current host."""
    run, host = _pod("pod")
    with ctx_state.use(run), ctx_host.use(host):
        yield host


def _probe(wanted: Desired, *roles: Any) -> Probe:
    request = merge([role.reads(wanted) for role in roles])
    ran = probing.run(**request.arguments())
    assert ran.returncode == 0, ran.stderr
    return parse_probe(ran.stdout.splitlines())


def test_a_role_returns_what_it_made_and_what_the_hook_restores(pod: Host, tmp_path: Path) -> None:
    target = tmp_path / "new" / "motd"
    wanted = desired({"files": {str(target): {"content": "hello\n"}}})
    result = files.apply(wanted, _probe(wanted, files))
    assert isinstance(result, findings.Result) and result.role == "Files"
    assert result.made[str(target)].path == str(target)
    assert result.made[str(target.parent)] == DirEntry(str(target.parent))  # made to write it
    restorable = result.restorable[str(target)]
    assert (restorable.content, restorable.mode, restorable.before) == ("hello\n", "644", True)
    assert result.violations == [] and result.value is None
    assert findings.of(pod).results == [result]


def test_a_violation_is_the_roles_and_the_pods(pod: Host, tmp_path: Path) -> None:
    wanted = desired({"disk": {"min_free": {str(tmp_path): "64T"}}})  # more than any disk
    result = disk.apply(wanted, _probe(wanted, disk))
    assert [v.finding for v in result.violations] == [f"disk.min_free.{tmp_path}"]
    assert result.value is True  # the role's own answer: the pod goes on
    assert findings.of(pod).violations == result.violations


def test_the_pods_findings_are_its_roles_results_in_order(pod: Host, tmp_path: Path) -> None:
    """The record's new entries are the roles' in the order they ran (a later role's entry
    for a path replaces an earlier one's, where the first put it), and what podstate's own
    code records outside every role is a result of its own, first."""
    one, two = tmp_path / "one", tmp_path / "two"
    first = desired({"files": {str(one): {"content": "1\n"}}})
    second = desired({"files": {str(two): {"content": "2\n"}, str(one): {"content": "3\n"}}})
    a = files.apply(first, _probe(first, files))
    b = files.apply(second, _probe(second, files))
    found = findings.of(pod)
    assert found.results == [a, b] and found.running == []
    assert list(found.made) == [str(one), str(two)]
    assert found.makes(str(two)) and not found.makes(str(tmp_path / "three"))
    assert found.restorable[str(one)].content == "3\n"
    findings.left("/elsewhere", "not podstate's")  # outside every role
    assert found.results[0].role == "podstate" and found.left == {"/elsewhere": "not podstate's"}


def test_a_new_run_starts_with_no_findings(tmp_path: Path) -> None:
    """Findings live on the run's host object: a pod of the same name in a new run has none
    of the last run's."""
    target = tmp_path / "f"
    wanted = desired({"files": {str(target): {"content": "x\n"}}})
    for _ in range(2):
        run, host = _pod("same-name")
        with ctx_state.use(run), ctx_host.use(host):
            assert findings.of(host).results == []
            files.apply(wanted, _probe(wanted, files))
            assert list(findings.of(host).made) == [str(target)]
