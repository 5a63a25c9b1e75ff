"""Findings live on pyinfra's host object (podstate.pyinfra_api.plan.kept): pods planned at
once, each in its own greenlet behind pyinfra's ``host`` context proxy, never see each
other's; a role that raises leaves no role running; what is recorded outside every role
is podstate's own result.

Each test plans on pyinfra hosts that are never connected, as a check plans its pods
(podstate.pyinfra_api.cli.load_deploy_files: one greenlet of the state's pool per pod, the
pod the current host in it).
"""

from __future__ import annotations

import typing
from typing import Any

import gevent
import pytest
from pyinfra import host as current_host
from pyinfra.api import Host, Inventory, State
from pyinfra.context import ctx_host, ctx_state

from podstate.facts.record import DirEntry
from podstate.run import findings
from podstate.run.role import role


def _run(*names: str) -> tuple[State, list[Host]]:
    inventory = typing.cast(Any, Inventory)((list(names), {}))  # pyinfra's is untyped
    return State(inventory), list(inventory)


@role("Interleaved")
def _interleaved(rounds: int) -> str:
    """Record the current pod's own things, yielding to the other pods' greenlets between
    each, and return the pod's name as the role's value."""
    name = current_host.name
    for i in range(rounds):
        findings.made(DirEntry(f"/{name}/{i}"))
        gevent.sleep(0)
        findings.violation(f"{name} {i}", finding=f"{name}.{i}")
        gevent.sleep(0)
        findings.left(f"/{name}/left/{i}", name)
        findings.hooked(f"/{name}/hooked/{i}")
        gevent.sleep(0)
    return str(current_host.name)


@role("Raises")
def _raises() -> None:
    findings.made(DirEntry(f"/{current_host.name}/before"))
    gevent.sleep(0)
    raise RuntimeError(current_host.name)


def _plan_at_once(run: State, hosts: list[Host], plan: Any) -> dict[str, Any]:
    """Return what ``plan()`` returned on each of ``hosts``, planned at once, each in a
    greenlet of the run's pool with the pod the current host, as the check plans."""
    out: dict[str, Any] = {}

    def one(pod: Host) -> None:
        with ctx_host.use(pod):  # a greenlet's own (pyinfra's host context is greenlet-local)
            out[pod.name] = plan()

    with ctx_state.use(run):  # one for the whole run, as the CLI sets it
        gevent.joinall([run.pool.spawn(one, pod) for pod in hosts], raise_error=True)
    return out


def test_pods_planned_at_once_never_see_each_others_findings() -> None:
    run, hosts = _run("a", "b", "c")
    rounds = 4
    returned = _plan_at_once(run, hosts, lambda: _interleaved(rounds))
    for pod in hosts:
        name = pod.name
        found = findings.of(pod)
        assert returned[name].value == name and returned[name].role == "Interleaved"
        assert found.results == [returned[name]]
        assert sorted(found.made) == sorted(f"/{name}/{i}" for i in range(rounds))
        assert [v.finding for v in found.violations] == [f"{name}.{i}" for i in range(rounds)]
        assert {v.role for v in found.violations} == {"Interleaved"}
        assert set(found.left.values()) == {name}
        assert found.hooked == [f"/{name}/hooked/{i}" for i in range(rounds)]
        assert found.running == [] and list(found.roles) == ["Interleaved"]


def test_a_role_that_raises_leaves_none_running_and_later_records_are_podstates() -> None:
    run, hosts = _run("a", "b")

    def plan() -> str:
        with pytest.raises(RuntimeError):
            _raises()
        found = findings.of(current_host)
        assert found.running == []
        findings.made(DirEntry(f"/{current_host.name}/after"))  # outside every role
        gevent.sleep(0)
        after = _interleaved(1)
        return str(after.value)

    assert _plan_at_once(run, hosts, plan) == {"a": "a", "b": "b"}
    for pod in hosts:
        found = findings.of(pod)
        assert [r.role for r in found.results] == ["podstate", "Raises", "Interleaved"]
        own, raised, later = found.results
        assert list(own.made) == [f"/{pod.name}/after"]
        assert list(raised.made) == [f"/{pod.name}/before"]
        assert list(later.made) == [f"/{pod.name}/0"] and later.violations == found.violations
        assert found.running == []
        assert "Raises" in found.roles  # its operations are still its own, as before


def test_the_result_outside_every_role_is_one_and_first() -> None:
    """``result()`` with no role running makes podstate's own result once, first, even after
    roles have recorded theirs; the pod's merged findings read it like any other."""
    run, (pod,) = _run("a")
    with ctx_state.use(run), ctx_host.use(pod):
        _interleaved(1)
        found = findings.of(pod)
        own = found.result()
        assert own.role == "podstate" and found.results[0] is own
        assert found.result() is own and len(found.results) == 2
        findings.made(DirEntry("/own"))
        findings.restorable("/own", "x\n", "644")
        assert found.made["/own"] == DirEntry("/own") and "/own" in found.restorable


def test_a_new_host_object_starts_with_none_and_the_proxy_reads_the_hosts() -> None:
    run, (pod,) = _run("a")
    again, (same_name,) = _run("a")
    with ctx_state.use(run), ctx_host.use(pod):
        _interleaved(1)
        assert findings.of(current_host) is findings.of(pod)
    assert findings.of(same_name).results == [] and findings.of(pod).results != []
