"""A provider is one module: a third one, defined in this file alone (a small Lambda-like
API), goes through the registry as RunPod and Vast do: the inventory sources, its listing,
its pods and their host data, its stop and what that costs, its groups and the boot hook's
layout, without a line of the package changed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

from podstate.desired.errors import SpecError
from podstate.inventory import actions, fleet, hostkeys, naming
from podstate.inventory.podsfile import read_pods_file
from podstate.operations.boot import ON_DISK, Layout
from podstate.providers import registry
from podstate.providers.record import Provider
from podstate.watch.idler import stop_cost
from tests.e2e import new_vars_dir


@dataclass(frozen=True)
class Instance:
    """What the test provider's API says of one instance."""

    id: str
    name: str
    created_at: str
    host: str
    port: int
    gpu: str

    @property
    def key(self) -> str:
        return f"lambda:{self.id}"


LISTED = [
    Instance("i-2", "train", "2026-01-02T00:00:00Z", "10.0.0.2", 2202, "NVIDIA H100 SXM"),
    Instance("i-1", "eval", "2026-01-01T00:00:00Z", "10.0.0.1", 2201, "NVIDIA A10"),
]
STOPPED: list[str] = []


def listed() -> naming.Listing:
    return naming.Listing("lambda", list(LISTED), [], [vars(i) for i in LISTED], None)


def hosted(instance: Instance) -> naming.Hosted:
    data: dict[str, Any] = {"pod_id": instance.id, "provider": "lambda", "cloud": "SECURE"}
    groups = ["secure", "lambda", str(naming.gpu_group(instance.gpu))]
    return (instance.host, instance.port, "ubuntu"), data, groups


def to_pods(
    listing: naming.Listing,
    rules: dict[str, list[str]],
    names: dict[str, str],
    record_host_keys: bool = True,
    strict_host_keys: bool | None = None,
) -> list[Any]:
    trusts = [
        hostkeys.vouched(
            hostkeys.plan(f"lambda-{i.id}", names[i.key], i.host, i.port, None, None, False),
            (),
            "the test API serves no host keys",
            False,
        )
        for i in listing.pods
    ]
    return naming.to_pods(listing, rules, names, trusts, record_host_keys, hosted)


def stop(instance_id: str) -> actions.Stopped:
    STOPPED.append(instance_id)
    return actions.Stopped(True)


LAMBDA = Provider(
    name="lambda",
    shown="Lambda API",
    key_variable="LAMBDA_API_KEY",
    listing=f"{__name__}:listed",
    to_pods=f"{__name__}:to_pods",
    stop=f"{__name__}:stop",
    listing_key="lambda",
    identity=("LAMBDA_INSTANCE_ID",),
    identified="Lambda instance id",
    keeps_disk=True,
    stop_cost="a stop keeps the disk (the test provider)",
    groups=("secure", "lambda"),
    start_hook="the instance's cloud-init",
)


@pytest.fixture
def env(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith(("PODSTATE_", "RUNPOD_", "VAST_", "LAMBDA_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PODSTATE_VARS", str(new_vars_dir(tmp_path / "vars")))
    monkeypatch.setenv("PODSTATE_HOSTKEYS", str(tmp_path / "hostkeys"))
    monkeypatch.chdir(tmp_path)  # no default pods file here
    STOPPED.clear()
    with registry.registered(LAMBDA):
        yield monkeypatch


def test_its_key_selects_it_and_the_listing_goes_through_its_module(env):
    env.setenv("LAMBDA_API_KEY", "k")
    assert fleet.sources() == ["lambda"]
    found = fleet.load_inventory()
    assert found.source == "Lambda API"
    assert [pod.name for pod in found.pods] == ["eval", "train"]
    train = found.pods[1]
    assert train.groups == ["secure", "lambda", "gpu_h100_sxm"]
    data = train.data
    assert (data["provider"], data["pod_id"], data["ssh_user"]) == ("lambda", "i-2", "ubuntu")
    assert (data["ssh_hostname"], data["ssh_port"]) == ("10.0.0.2", 2202)
    assert "podstate" in data  # its desired state, resolved and validated
    assert found.listing == {"lambda": [vars(i) for i in LISTED]}


def test_podstate_inventory_names_it_beside_the_others(env):
    env.setenv("PODSTATE_INVENTORY", "lambda,vast")
    assert fleet.sources() == ["lambda", "vast"]
    env.setenv("PODSTATE_INVENTORY", "paperspace")
    with pytest.raises(SpecError, match=r"allowed: file, runpod, vast, lambda,"):
        fleet.sources()


def test_its_stop_and_what_it_costs(env):
    data = {"provider": "lambda", "pod_id": "i-1"}
    assert actions.stop(data).ok
    assert STOPPED == ["i-1"]
    assert stop_cost(data) == LAMBDA.stop_cost


def test_its_groups_are_reserved_and_a_pods_file_may_name_it(env, tmp_path):
    assert naming.reserved("lambda")
    pods = tmp_path / "pods.yaml"
    pods.write_text("pods:\n  box:\n    ssh_hostname: 10.0.0.9\n    provider: lambda\n")
    assert read_pods_file(pods)[0].groups == ["community", "lambda"]


def test_the_boot_hook_follows_its_record(env):
    layout = Layout("/workspace", "lambda")
    assert layout.home == ON_DISK  # a stop keeps its disk
    assert layout.identity == ("LAMBDA_INSTANCE_ID",)
    assert layout.identified == "Lambda instance id"
    assert layout.how_to_run().startswith("the instance's cloud-init must source it: ")


def test_outside_the_block_the_package_knows_only_its_own():
    assert registry.every() == registry.BUILTIN
    assert not naming.reserved("lambda")
    assert not actions.stop({"provider": "lambda", "pod_id": "i-1"}).ok
    with pytest.raises(ValueError, match="no boot hook layout"):
        Layout("/workspace", "lambda")
