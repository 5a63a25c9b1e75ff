"""podstate's deploy plans the phases in order (podstate.pod.phases); a pod whose container
disk role fails plans no other phase, the last ones included, and still gets the pod lock's
release and the report, as before the run was a table.

The deploy is planned on a pyinfra host that is never connected; its one probe is read by
this machine's sh (tests/probing.py), as a pod's would be.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import Host, Inventory, State
from pyinfra.context import ctx_host, ctx_state

from podstate.desired.spec import normalize
from podstate.desired.state import State as Desired
from podstate.facts.probe import Probe, parse_probe
from podstate.pod import deploy
from podstate.pod import probe as deploy_probe
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import findings
from tests import probing


def _read_here(wanted: Desired) -> Probe:
    ran = probing.run(**deploy_probe.request(wanted).arguments())
    assert ran.returncode == 0, ran.stderr
    return parse_probe(ran.stdout.splitlines())


def _plan(raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[State, Host]:
    monkeypatch.setattr(deploy_probe, "read", _read_here)
    data = {"podstate": normalize(raw, None)}
    inventory = typing.cast(Any, Inventory)(([("pod", data)], {}))  # pyinfra's is untyped
    (host,) = inventory
    run = State(inventory)
    with ctx_state.use(run), ctx_host.use(host):
        deploy.run()
    return run, host


def test_a_pod_whose_disk_fails_plans_no_other_phase(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    raw = {
        "disk_reserve": "64T",  # more than any container disk has free
        "dirs": {"HF_HOME": str(tmp_path / "hf")},  # on the container disk
        "files": {str(tmp_path / "motd"): {"content": "hi\n"}},
    }
    run, host = _plan(raw, monkeypatch)
    found = findings.of(host)
    assert list(found.roles) == ["Container disk"]
    assert [r.role for r in found.results] == ["Container disk"]
    assert [v.finding for v in found.violations] == ["disk_reserve"]
    names = [pyinfra_plan.op_name(run, h) for h in pyinfra_plan.host_order(run, host)]
    assert names[-2:] == ["Release the pod lock", "Report what apply cannot fix"]
    assert not any("motd" in name or "ready" in name.lower() for name in names), names


def test_a_pod_whose_disk_has_room_plans_every_phase(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    raw = {"disk_reserve": "0", "files": {str(tmp_path / "motd"): {"content": "hi\n"}}}
    run, host = _plan(raw, monkeypatch)
    roles = list(findings.of(host).roles)
    assert roles[0] == "Container disk" and "Files" in roles and "Ready" in roles
    names = [pyinfra_plan.op_name(run, h) for h in pyinfra_plan.host_order(run, host)]
    assert names[-2:] == ["Release the pod lock", "Report what apply cannot fix"]
