"""The live inventory from Vast.ai's API, beside RunPod's.

The provider API of the tests (tests/api_server.py: the sandbox's own API server, listing
what a test sets, in pages as Vast does) stands in for Vast's; every listing it serves is first
validated against the instance list of Vast's OpenAPI spec (a copy of
``reference/vast-openapi-instances.yaml`` in tests/fixtures/vast/), so the fixtures cannot
drift from the real API.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podstate.desired.errors import SpecError
from podstate.inventory import naming, vast_client, vast_instances
from podstate.inventory.podsfile import read_pods_file
from podstate.inventory.runpod_pods import Skipped
from tests import api_server
from tests.api_server import KEYS, ProviderApi
from tests.e2e import new_vars_dir

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
KEY = KEYS["vast"]


def assert_valid(doc: dict) -> None:
    """Fail unless ``doc`` is a page of ``GET /api/v1/instances`` the real API could send."""
    api_server.assert_valid("vast", doc)


def instance(number: int, label: str | None = None, **fields) -> dict:
    """Return a running instance reached directly on 127.0.0.1, as Vast lists it."""
    doc = {
        "id": number,
        "label": label,
        "actual_status": "running",
        "intended_status": "running",
        "cur_state": "running",
        "image_runtype": "ssh ssh_direc ssh_proxy",
        "public_ipaddr": "192.0.2.45",
        "ssh_host": "ssh5.vast.ai",
        "ssh_port": 10600,
        "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(20000 + number % 1000)}]},
        "gpu_name": "RTX 4090",
        "num_gpus": 2,
        "gpu_util": 0.5,
        "dph_total": 0.8021,
        "start_date": 1_780_000_000.0 + number,
        "verification": "verified",
        "machine_id": 12,
        "extra_env": [["HF_TOKEN", "hf_secret_token_value"]],
        "onstart": "touch ~/.no_auto_tmux",
    }
    doc.update(fields)
    return doc


@pytest.fixture
def api(provider_api) -> ProviderApi:
    return provider_api("vast")


@pytest.fixture
def env(api, tmp_path):
    """The environment of a user with VAST_API_KEY set and no pods file."""
    result = {k: v for k, v in os.environ.items() if not k.startswith(("PODSTATE_", "RUNPOD_"))}
    result.update(
        VAST_API_KEY=KEY,
        VAST_API_URL=api.url,
        PODSTATE_VARS=str(new_vars_dir(tmp_path / "vars")),
        PODSTATE_HOSTKEYS=str(tmp_path / "hostkeys"),
    )
    return result


def run(*args: str, env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=ROOT, env=env, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert KEY not in result.stdout + result.stderr, "the API key was printed"
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def listing(env: dict) -> dict:
    result = run("podstate", "inventory", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("podstate:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _settings(api: ProviderApi) -> vast_client.VastClient:
    return vast_client.settings({"VAST_API_KEY": KEY, "VAST_API_URL": api.url})


# --- the listing ---------------------------------------------------------------------------


def test_every_page_is_listed(api, env):
    api.serve([instance(n, f"job_{n}") for n in range(1, 61)])
    found = listing(env)
    assert len(found["pods"]) == 60
    assert found["source"] == "Vast API"
    assert [r["query"].get("after_token") is None for r in api.requests] == [True, False, False]
    assert all(r["query"]["limit"] == ["25"] for r in api.requests)
    assert api.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


def test_endpoints_direct_proxy_and_jupyter(api, env):
    proxied = instance(2, "proxied", ports={}, image_runtype="ssh_proxy")
    jupyter = instance(3, "notebook", ports=None, image_runtype="jupyter_proxy", ssh_port=10700)
    api.serve([instance(1, "direct_one"), proxied, jupyter])
    pods = {pod["name"]: pod for pod in listing(env)["pods"]}
    assert (pods["direct_one"]["endpoint"], pods["direct_one"]["address"]) == (
        "direct",
        "192.0.2.45",
    )
    assert pods["direct_one"]["port"] == 20001
    assert (pods["proxied"]["endpoint"], pods["proxied"]["address"]) == ("proxy", "ssh5.vast.ai")
    assert pods["proxied"]["port"] == 10600
    assert pods["notebook"]["port"] == 10701  # Vast's CLI: the proxy port plus one for jupyter
    table = run("podstate", "inventory", env=env).stdout
    assert "root@ssh5.vast.ai:10600 (proxy)" in table


def test_groups_cloud_and_host_data(api, env):
    api.serve([instance(7, "trainers", verification="verified", num_gpus=8, gpu_name="H100 SXM")])
    (pod,) = listing(env)["pods"]
    assert pod["groups"] == ["community", "vast", "trainers", "gpu_h100_sxm", "gpus_8"]
    assert (pod["provider"], pod["pod_id"]) == ("vast", "7")


def test_skipped_instances_say_why(api, env):
    api.serve(
        [
            instance(1, "stopped_one", actual_status="stopped", ports=None),
            instance(2, "booting", actual_status=None),
            instance(3, "odd", actual_status="unknown"),
            instance(4, "weird", actual_status="melted"),
            {
                k: v
                for k, v in instance(5, "nowhere", ports={}, ssh_host="").items()
                if k != "ssh_port"
            },
            instance(6, "fine"),
        ]
    )
    found = listing(env)
    assert [pod["name"] for pod in found["pods"]] == ["fine"]
    reasons = {item["name"]: item["reason"] for item in found["skipped"]}
    assert reasons["stopped_one"] == "status stopped"
    assert "still provisioning" in reasons["booting"]
    assert reasons["odd"] == "status unknown"
    assert "which Vast does not document" in reasons["weird"]
    assert "no direct port for 22/tcp and no proxy host" in reasons["nowhere"]
    assert all(item["provider"] == "vast" for item in found["skipped"])
    table = run("podstate", "inventory", env=env).stdout
    assert "skipping Vast instance 1 (stopped_one): status stopped" in table


def test_a_direct_port_without_a_public_address_skips_that_instance_only(api, env):
    no_address = {k: v for k, v in instance(2, "no_address").items() if k != "public_ipaddr"}
    empty = instance(3, "empty_address", public_ipaddr="")
    no_port = instance(4, "no_host_port", ports={"22/tcp": [{"HostIp": "0.0.0.0"}]})
    api.serve([instance(1, "fine"), no_address, empty, no_port, instance(5, "also_fine")])
    found = listing(env)
    assert [pod["name"] for pod in found["pods"]] == ["also_fine", "fine"]
    reasons = {item["name"]: item["reason"] for item in found["skipped"]}
    assert set(reasons) == {"no_address", "empty_address", "no_host_port"}
    assert reasons["no_address"].startswith("a direct port for 22/tcp without a public_ipaddr")
    assert reasons["empty_address"] == reasons["no_address"]
    assert reasons["no_host_port"].startswith("a direct port for 22/tcp without a HostPort")
    table = run("podstate", "inventory", env=env)
    assert table.returncode == 0
    assert "skipping Vast instance 2 (no_address): a direct port for 22/tcp" in table.stdout


def test_an_instance_listed_twice_as_pages_shift_is_skipped_the_others_listed(api, env):
    first = [instance(n, f"job_{n}") for n in range(1, 26)]
    shifted = [instance(25, "job_25", actual_status="stopped"), instance(26, "job_26")]
    for page in ({"next_token": "MjU=", "instances": first}, {"instances": shifted}):
        api.queue(200, {"success": True, **page})
    found = listing(env)
    listed = sorted(int(pod["pod_id"]) for pod in found["pods"])
    assert listed == [*range(1, 25), 26]
    (skipped,) = found["skipped"]
    assert (skipped["id"], skipped["name"]) == ("25", "job_25")
    assert skipped["reason"].startswith("listed twice in one listing")


def test_two_instances_with_one_label_the_oldest_keeps_it(api, env):
    older = instance(900, "twin", start_date=1_700_000_000.0)
    newer = instance(5, "twin", start_date=1_800_000_000.0)
    api.serve([older, newer, instance(6)])
    names = {pod["pod_id"]: pod["name"] for pod in listing(env)["pods"]}
    assert names == {"900": "twin", "5": "twin-5", "6": "C.6"}


def test_a_label_that_is_no_group_name_is_one_note(api, env):
    api.serve([instance(8, "ML Training Job 2025"), instance(9, "vast")])
    found = listing(env)
    groups = {pod["pod_id"]: pod["groups"] for pod in found["pods"]}
    assert groups["8"] == ["community", "vast", "gpu_rtx_4090", "gpus_2"]
    assert groups["9"] == ["community", "vast", "gpu_rtx_4090", "gpus_2"]
    assert len(found["notes"]) == 2
    assert '"ML Training Job 2025" is not a valid group name' in found["notes"][0]
    assert "a group podstate sets itself" in found["notes"][1]


def test_a_listing_handed_on_keeps_no_template_secret():
    kept = vast_instances.kept([instance(1, "a")])
    assert "extra_env" not in kept[0] and "onstart" not in kept[0]
    assert "hf_secret_token_value" not in json.dumps(kept)


# --- faults: each one line, bounded --------------------------------------------------------


def test_a_page_that_repeats_a_token_is_one_line(api, env):
    page = {"success": True, "next_token": "c2FtZQ==", "instances": [instance(1, "a")]}
    for _ in range(2):
        api.queue(200, page)
    line = one_error_line(run("podstate", "inventory", env=env))
    assert "page 2 repeats the next_token of an earlier page" in line
    assert len(api.requests) == 2


def test_429_without_retry_after_is_backed_off_and_said(api):
    api.serve([instance(1, "a")])
    for _ in range(2):
        api.queue(429, {"detail": "API requests too frequent endpoint threshold=1.0"})
    waits: list[float] = []
    instances, notes = _settings(api).fetch(sleep=waits.append)
    assert waits == [1.0, 2.0]
    assert len(instances) == 1
    assert notes == [
        "the Vast API's rate limit was hit 2 times (429, no Retry-After): podstate waited 3 s "
        "in all"
    ]


def test_429_forever_is_bounded(api):
    for _ in range(20):
        api.queue(429, {"detail": "API requests too frequent endpoint threshold=1.0"})
    waits: list[float] = []
    with pytest.raises(vast_client.RateLimited, match=r"page 1 still refused .* after 5 tries"):
        _settings(api).fetch(sleep=waits.append)
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert len(api.requests) == 5


@pytest.mark.parametrize(
    "status,body,words",
    [
        (401, {"success": False, "error": "auth_error", "msg": f"Invalid user key {KEY}"},
         "the Vast API refused VAST_API_KEY (401 Unauthorized: Invalid user key <VAST_API_KEY>)"),
        (200, b"<html>login</html>", "answered page 1 with something that is not JSON"),
        (200, {"success": True, "instances": "none"}, "expected an object with an 'instances'"),
        (200, {"success": True, "instances": [{"id": "x"}]}, "instances[0].id: expected an int"),
        (500, {"detail": "oops"}, "answered 500 Internal Server Error: oops"),
    ],
)  # fmt: skip
def test_api_errors_are_one_line(api, env, status, body, words):
    api.queue(status, body)
    assert words in one_error_line(run("podstate", "inventory", env=env))


def test_no_key_and_an_unreachable_api_are_one_line(env):
    no_key = {k: v for k, v in env.items() if k != "VAST_API_KEY"}
    no_key["PODSTATE_INVENTORY"] = "vast"
    assert "VAST_API_KEY is not set" in one_error_line(run("podstate", "inventory", env=no_key))
    with socket_closed() as url:
        env["VAST_API_URL"] = url
        assert "cannot reach the Vast API at" in one_error_line(
            run("podstate", "inventory", env=env)
        )


class socket_closed:
    """A loopback URL nothing listens on."""

    def __enter__(self) -> str:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *args: object) -> None:
        self.sock.close()


# --- one inventory across clouds -----------------------------------------------------------


def test_names_across_providers_the_oldest_keeps_a_name():
    runpod_pod = Skipped("rp1", "trainer", "status EXITED", "2026-01-01T00:00:00Z")
    vast_new = Skipped("77", "trainer", "status stopped", "2026-06-01T00:00:00Z", "vast")
    vast_old = Skipped("78", "eval", "status stopped", "2025-06-01T00:00:00Z", "vast")
    runpod_new = Skipped("rp2", "eval", "status EXITED", "2026-06-01T00:00:00Z")
    names = naming.host_names([vast_new, runpod_pod, runpod_new, vast_old])
    assert names == {
        "rp1": "trainer",
        "vast:77": "trainer-77",
        "vast:78": "eval",
        "rp2": "eval-rp2",
    }


def test_pods_file_provider_key(tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text(
        "pods:\n  a:\n    ssh_hostname: 192.0.2.1\n    provider: vast\n"
        "  b:\n    ssh_hostname: 192.0.2.2\n    provider: runpod\n    groups: [x]\n"
    )
    pods = {pod.name: pod for pod in read_pods_file(path)}
    assert pods["a"].groups == ["community", "vast"]
    assert pods["b"].groups == ["community", "runpod", "x"]
    assert pods["a"].data["provider"] == "vast"
    path.write_text("pods:\n  a:\n    ssh_hostname: 192.0.2.1\n    provider: aws\n")
    with pytest.raises(SpecError, match=r"pods\.a\.provider: 'aws' is not one of: runpod, vast"):
        read_pods_file(path)


def test_vast_and_runpod_at_once(api, env, provider_api):
    from tests.test_runpod import fixture

    runpod = provider_api("runpod", key="rpa_other_key")
    runpod.serve(copy.deepcopy(fixture("example.json")))
    env.update(RUNPOD_API_KEY=runpod.key, RUNPOD_API_URL=runpod.url)
    api.serve([instance(4, "pytorch-training", start_date=4_000_000_000.0)])
    env["PODSTATE_INVENTORY"] = "runpod,vast"
    found = listing(env)
    assert found["source"] == "RunPod API and Vast API"
    providers = {pod["name"]: pod["provider"] for pod in found["pods"]}
    # the RunPod pod is older: it keeps the name, the Vast instance gets the suffix
    assert providers == {"pytorch-training": "runpod", "pytorch-training-4": "vast"}
    del env["PODSTATE_INVENTORY"]  # both keys, no pods file: both providers
    assert listing(env)["source"] == "RunPod API and Vast API"


def test_the_container_start_is_read_from_the_boot_id_and_process_1s_start():
    from podstate.facts.start import PROBE_LINE, parse

    line = subprocess.run(["sh", "-c", PROBE_LINE], capture_output=True, text=True).stdout
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    ticks = Path("/proc/1/stat").read_text().rpartition(") ")[2].split()[19]
    assert parse(line.strip().partition(" ")[2]) == f"{boot_id}:{ticks}"
    assert parse(None) is None and parse("not-a-boot-id 12") is None
    assert parse(f"{boot_id} x") is None


def test_a_marker_from_another_container_start_is_a_restart_with_what_is_gone():
    from dataclasses import replace

    from podstate.facts.files import FileInfo
    from podstate.facts.probe import Probe, parse_probe
    from roles.ready import MARKER, restart, stale
    from tests.typed_state import state

    def probe(marker: dict | None, start: str | None) -> Probe:
        text = json.dumps(marker) if marker else None
        found = {MARKER: FileInfo("file", content=text)} if text else {}
        return replace(parse_probe([]), files=found, container_start=start)

    marker = {"digest": "d", "applied_at": "2026-01-01T00:00:00Z", "container": "b:1"}
    wanted = state({"scratch": {"/scratch": {"size": "1G"}}})
    assert restart(probe(marker, "b:1"), "/v/record", "pod", None, wanted) is None
    again = restart(probe(marker, "b:2"), "/v/record", "pod", None, wanted)
    assert again == {
        "applied_at": "2026-01-01T00:00:00Z",
        "since": None,
        "gone": ["processes", "/dev/shm contents", "scratch /scratch"],
    }
    assert stale(marker, probe(None, None))  # a start not read: not this one
    assert not stale({"digest": "d"}, probe(None, "b:2"))  # written before starts


def test_vast_prices_and_gpu_use_map_to_the_inventorys_cost_and_live_reading():
    from podstate.inventory import live
    from podstate.inventory.api_http import InventoryError
    from podstate.inventory.vast_instances import parse

    (found,), _ = parse([instance(7, "web", gpu_util=0.4, dph_total=0.8021)])
    assert (found.gpu_util, found.dph_total) == (0.4, 0.8021)
    assert live.idle(live.one_utilization(found.gpu_util)) is False  # any use is use
    assert live.idle(live.one_utilization(0.0)) is True
    assert live.one_utilization(None) is None  # unknown, never idle
    with pytest.raises(InventoryError) as e:
        parse([instance(7, "web", gpu_util=140.0)])
    assert str(e.value) == (
        "unexpected Vast API response: instances[0] (id 7).gpu_util: expected a percentage from "
        "0 to 100, got 140"
    )
