"""The live inventory from RunPod's v2 API, and the per-pod host-key store.

The provider API of the tests (tests/api_server.py: the sandbox's own API server, listing
what a test sets) stands in for RunPod's; every pod list it serves is first validated against
``ListPodsResponse`` of RunPod's OpenAPI document (a copy of
``reference/runpod-openapi-v2.json`` in tests/fixtures/runpod/), so the fixtures cannot
drift from the real API. The end-to-end tests point it at sandbox pods and run
the real ``pyinfra`` CLI over real SSH.
"""

from __future__ import annotations

import copy
import email.utils
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from podstate.desired.errors import SpecError
from podstate.inventory import hostkey_hints, hostkeys, runpod, runpod_client, runpod_pods
from podstate.inventory.fleet import load_pods
from tests import api_server
from tests.api_server import KEYS, PROBLEM, RUNPOD_SPEC, SCHEMAS, ProviderApi
from tests.e2e import new_vars_dir, write_vars

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FIXTURES = ROOT / "tests" / "fixtures" / "runpod"
SPEC = RUNPOD_SPEC
KEY = KEYS["runpod"]
SUCCESS_FIXTURES = ["example.json", "fleet.json", "cluster.json"]
LIST_PODS = SCHEMAS["runpod"]


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def assert_valid(doc: dict) -> None:
    """Fail unless ``doc`` is a ListPodsResponse the real API could send."""
    api_server.assert_valid("runpod", doc)


@pytest.fixture
def api(provider_api) -> ProviderApi:
    return provider_api("runpod")


@pytest.fixture
def env(api, tmp_path):
    """The environment of a user with RUNPOD_API_KEY set and no pods file."""
    vars_dir = new_vars_dir(tmp_path / "vars")
    result = {k: v for k, v in os.environ.items() if not k.startswith(("PODSTATE_", "RUNPOD_"))}
    result.update(
        RUNPOD_API_KEY=KEY,
        RUNPOD_API_URL=api.url,
        RUNPOD_API_TIMEOUT="10",
        PODSTATE_VARS=str(vars_dir),
        PODSTATE_HOSTKEYS=str(tmp_path / "hostkeys"),
    )
    return result


def run(*args: str, env: dict, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run a command from the repository root (or ``cwd``) as a user would; stdin closed."""
    result = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert KEY not in result.stdout + result.stderr, "the API key was printed"
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def inventory(env: dict, cwd: Path = ROOT) -> dict:
    result = run("podstate", "inventory", "--json", env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def debug_inventory(env: dict, *flags: str) -> tuple[dict, subprocess.CompletedProcess]:
    """Return pyinfra's view of the inventory (host name -> host) without connecting."""
    result = run("pyinfra", "--json", *flags, "inventories/pods.py", "debug-inventory", env=env)
    assert result.returncode == 0, result.stderr
    start = result.stdout.index("[")
    hosts = json.loads(result.stdout[start : result.stdout.rindex("]") + 1])
    return {host["name"]: host for host in hosts}, result


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("podstate:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- fixtures match the API ---------------------------------------------------------------


def test_example_fixture_is_the_specs_own_example():
    example = SPEC["paths"]["/v2/pods"]["get"]["responses"]["200"]["content"]["application/json"][
        "examples"
    ]["pods"]["value"]
    assert fixture("example.json") == example


@pytest.mark.parametrize("name", SUCCESS_FIXTURES)
def test_success_fixtures_validate_against_the_spec(name):
    assert_valid(fixture(name))


@pytest.mark.parametrize("name", ["missing-status.json", "wrong-port-type.json"])
def test_malformed_fixtures_do_not(name):
    assert list(LIST_PODS.iter_errors(fixture(name)))


@pytest.mark.parametrize("name", ["401.json", "429.json"])
def test_problem_fixtures_validate_against_the_spec(name):
    assert not list(PROBLEM.iter_errors(fixture(name)))


# --- the inventory ------------------------------------------------------------------------


def test_the_specs_example_pod_becomes_a_host(api, env):
    api.serve(fixture("example.json"))
    listing = inventory(env)
    assert listing == {
        "source": "RunPod API",
        "pods": [
            {
                "name": "pytorch-training",
                "address": "195.26.233.3",
                "port": 34446,
                "endpoint": "direct",
                "user": "root",
                "groups": ["secure", "runpod", "gpu_rtx_4090", "dc_us_ks_2", "gpus_1"],
                "pod_id": "7h9k2m4n6p",
                "provider": "runpod",
            }
        ],
        "skipped": [],
        "notes": [],
    }
    assert api.requests[0]["path"] == "/v2/pods"
    assert api.requests[0]["query"] == {}
    assert api.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


def test_inventory_table_shows_address_groups_and_skipped_pods(api, env):
    api.serve(fixture("fleet.json"))
    result = run("podstate", "inventory", env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "root@203.0.113.7:40122" in out
    assert "trainer-1" in out and "community, runpod, gpu_rtx_4090, dc_eu_ro_1, gpus_2" in out
    assert "skipping pod exit01 (stopped-one): status EXITED" in out
    assert "6 pods from the RunPod API, 4 skipped" in out


def test_fleet_names_groups_and_skipped_pods(api, env):
    api.serve(fixture("fleet.json"))
    listing = inventory(env)
    pods = {pod["name"]: pod for pod in listing["pods"]}
    assert set(pods) == {
        "trainer-1",
        "trainer-2",
        "worker",  # two pods named "worker", created at once: the lower id keeps the name
        "worker-wrk002",
        "my-pod-test-bad001",  # "my pod (test)" is no host name
        "cpu-box",
    }
    assert pods["trainer-2"]["groups"] == [
        "secure",
        "runpod",
        "gpu_h100_80gb_hbm3",
        "dc_us_ks_2",
        "gpus_8",
    ]
    assert pods["worker"]["groups"] == [
        "community",
        "runpod",
        "gpu_a100_sxm4_80gb",
        "dc_ca_mtl_1",
        "gpus_1",
    ]
    assert pods["cpu-box"]["groups"] == ["community", "runpod", "dc_eu_ro_1", "gpus_0"]
    skipped = {s["id"]: s for s in listing["skipped"]}
    assert set(skipped) == {"prov01", "exit01", "prox01", "noip01"}
    assert skipped["prov01"]["reason"] == "status PROVISIONING"
    assert skipped["exit01"] == {
        "id": "exit01",
        "provider": "runpod",
        "name": "stopped-one",
        "reason": "status EXITED",
    }
    assert "22/tcp is not exposed" in skipped["prox01"]["reason"]
    assert "no public port" in skipped["noip01"]["reason"]


def test_pyinfra_gets_host_data_and_each_skipped_pod_once_on_stderr(api, env, tmp_path):
    key_file = tmp_path / "id_test"
    key_file.write_text("not read until pyinfra connects\n")
    env["PODSTATE_SSH_KEY"] = str(key_file)
    api.serve(fixture("fleet.json"))
    hosts, result = debug_inventory(env)
    for pod_id, line in [
        ("prov01", "podstate: skipping pod prov01 (warming-up): status PROVISIONING"),
        ("exit01", "podstate: skipping pod exit01 (stopped-one): status EXITED"),
        ("prox01", "podstate: skipping pod prox01 (proxy-only): no direct SSH"),
        ("noip01", "podstate: skipping pod noip01 (no-public-ip): no direct SSH"),
    ]:
        assert result.stderr.count(f"skipping pod {pod_id} ") == 1
        assert line in result.stderr
    data = hosts["trainer-1"]["data"]
    assert {k: data[k] for k in ("ssh_hostname", "ssh_port", "ssh_user", "ssh_key")} == {
        "ssh_hostname": "203.0.113.7",
        "ssh_port": 40122,
        "ssh_user": "root",
        "ssh_key": str(key_file),
    }
    assert data["pod_id"] == "tr1abc"
    assert data["cloud"] == "COMMUNITY"
    assert (data["gpu_id"], data["gpu_count"]) == ("NVIDIA GeForce RTX 4090", 2)
    assert data["data_center"] == "EU-RO-1"
    assert data["started_at"] == "2026-06-01T12:02:00Z"
    assert data["ssh_known_hosts_file"] == str(tmp_path / "hostkeys" / "tr1abc.known_hosts")
    assert data["ssh_strict_host_key_checking"] == "accept-new"
    assert data["podstate"]["shm"] == {"min_size": 16 << 30}
    assert hosts["cpu-box"]["data"]["gpu_count"] == 0


def test_group_rules_and_group_vars_reach_the_state(api, env):
    vars_dir = Path(env["PODSTATE_VARS"])
    write_vars(vars_dir, "groups.yaml", {"trainers": ["trainer-*"], "all_workers": ["worker"]})
    write_vars(vars_dir, "group_vars/trainers.yaml", {"env": {"ROLE": "trainer"}})
    write_vars(vars_dir, "group_vars/gpu_h100_80gb_hbm3.yaml", {"env": {"ROLE": "h100"}})
    api.serve(fixture("fleet.json"))
    pods = {pod["name"]: pod for pod in inventory(env)["pods"]}
    assert pods["trainer-2"]["groups"][-1] == "trainers"
    assert "all_workers" in pods["worker-wrk002"]["groups"]  # its RunPod name matches
    assert "trainers" not in pods["cpu-box"]["groups"]
    hosts, _ = debug_inventory(env)
    # groups.yaml groups come after the automatic ones, so their vars win
    assert hosts["trainer-2"]["data"]["podstate"]["env"]["ROLE"] == "trainer"
    assert "ROLE" not in hosts["cpu-box"]["data"]["podstate"]["env"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("trainers: train-*\n", "groups.yaml: trainers: expected a list of pod name globs"),
        ("2fast: [a]\n", "groups.yaml: 2fast: not a valid group name"),
        ("secure: [a]\n", "groups.yaml: secure: set from the providers' data"),
        ("- a\n", "groups.yaml: expected a mapping of keys at the top"),
    ],
)
def test_bad_groups_file_is_one_line_before_any_request(api, env, text, message):
    write_vars(Path(env["PODSTATE_VARS"]), "groups.yaml", text)
    api.serve(fixture("example.json"))
    for command in (["podstate", "inventory"], ["pyinfra", "inventories/pods.py", "deploy/pod.py"]):
        line = one_error_line(run(*command, env=env))
        assert message in line
    assert api.requests == []


def test_cluster_members_only_when_asked(api, env):
    api.serve(fixture("cluster.json"))
    assert [pod["name"] for pod in inventory(env)["pods"]] == ["solo"]
    assert api.requests[-1]["query"] == {}
    env["PODSTATE_CLUSTER_PODS"] = "1"
    names = [pod["name"] for pod in inventory(env)["pods"]]
    assert names == ["ray-head", "ray-worker", "solo"]
    assert api.requests[-1]["query"] == {"includeClusterPods": ["true"]}


def test_cluster_members_listed_anyway_are_skipped(api, env):
    doc = fixture("cluster.json")
    api.serve(doc)
    api.queue(200, doc)  # a server that ignores includeClusterPods=false
    listing = inventory(env)
    assert [pod["name"] for pod in listing["pods"]] == ["solo"]
    assert {s["id"] for s in listing["skipped"]} == {"node00", "node01"}
    assert "PODSTATE_CLUSTER_PODS=1" in listing["skipped"][0]["reason"]


def test_pods_file_wins_over_the_api(api, env, tmp_path):
    pods_file = tmp_path / "pods.yaml"
    pods_file.write_text("pods:\n  mine: {ssh_hostname: 127.0.0.1, ssh_port: 2222}\n")
    env["PODSTATE_PODS"] = str(pods_file)
    listing = inventory(env)
    assert [pod["name"] for pod in listing["pods"]] == ["mine"]
    assert listing["pods"][0]["pod_id"] is None
    assert api.requests == []


@pytest.fixture
def project(tmp_path):
    """A directory run from, holding the default pods file inventories/pods.yaml (one pod)."""
    where = tmp_path / "project"
    (where / "inventories").mkdir(parents=True)
    (where / "inventories" / "pods.yaml").write_text(
        "pods:\n  mine: {ssh_hostname: 127.0.0.1, ssh_port: 2222}\n"
    )
    return where


def test_default_pods_file_beside_an_api_key_is_refused_naming_both(api, env, project):
    """Neither source is taken silently: the key is exported for RunPod's own tools too."""
    api.serve(fixture("example.json"))
    commands = (
        ["podstate", "inventory"],
        ["pyinfra", str(ROOT / "inventories/pods.py"), "debug-inventory"],
    )
    for command in commands:
        line = one_error_line(run(*command, env=env, cwd=project))
        assert "inventories/pods.yaml" in line and "RUNPOD_API_KEY" in line, line
        assert "PODSTATE_INVENTORY" in line
    assert api.requests == []


@pytest.mark.parametrize(
    "source,names,shown",
    [
        ("file", ["mine"], "pods file inventories/pods.yaml"),
        ("runpod", ["pytorch-training"], "RunPod API"),
        ("runpod, file", ["pytorch-training", "mine"], "RunPod API and pods file"),
    ],
)
def test_podstate_inventory_chooses_the_source_and_shows_it(
    api, env, project, source, names, shown
):
    api.serve(fixture("example.json"))
    env["PODSTATE_INVENTORY"] = source
    listing = inventory(env, cwd=project)
    assert [pod["name"] for pod in listing["pods"]] == names
    assert listing["source"].startswith(shown)
    assert bool(api.requests) == ("runpod" in source)
    text = run("podstate", "inventory", env=env, cwd=project).stdout
    assert f"pods from the {shown}" in text


@pytest.mark.parametrize(
    "variables,words",
    [
        (
            {"PODSTATE_INVENTORY": "lambda"},
            "PODSTATE_INVENTORY: unknown source 'lambda' (allowed: file, runpod, vast",
        ),
        ({"PODSTATE_INVENTORY": "file,file"}, "names a source twice"),
        (
            {"PODSTATE_INVENTORY": "runpod", "PODSTATE_PODS": "inventories/pods.yaml"},
            "PODSTATE_PODS names a pods file, which PODSTATE_INVENTORY=runpod does not read",
        ),
    ],
)
def test_a_wrong_source_is_one_line_before_any_request(api, env, project, variables, words):
    api.serve(fixture("example.json"))
    env.update(variables)
    assert words in one_error_line(run("podstate", "inventory", env=env, cwd=project))
    assert api.requests == []


def test_a_pod_two_sources_name_is_refused(api, env, project):
    api.serve(fixture("example.json"))
    (project / "inventories" / "pods.yaml").write_text(
        "pods:\n  pytorch-training: {ssh_hostname: 127.0.0.1}\n"
    )
    env["PODSTATE_INVENTORY"] = "file,runpod"
    line = one_error_line(run("podstate", "inventory", env=env, cwd=project))
    assert "pod pytorch-training is in more than one of PODSTATE_INVENTORY's sources" in line


def test_no_source_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PODSTATE_PODS", raising=False)
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    with pytest.raises(SpecError, match="or set RUNPOD_API_KEY"):
        load_pods()


def test_inventory_command_leaves_the_host_key_store_alone(api, env):
    api.serve(fixture("example.json"))
    inventory(env)
    assert not Path(env["PODSTATE_HOSTKEYS"]).exists()


STRICT_SCRIPT = """
import json, os
from podstate.inventory import fleet, hostkeys
def trust():
    return sorted({pod.data["host_key_trust"] for pod in fleet.load_pods()})
with fleet.strict_host_keys(True):
    strict = trust()
with fleet.strict_host_keys(False):
    trusting = trust()
print(json.dumps([strict, trusting, trust(), hostkeys.STRICT_ENV in os.environ]))
"""


@pytest.mark.parametrize("from_env", [False, True])
def test_strict_host_keys_reach_the_inventory_without_the_environment(api, env, from_env):
    """``podstate check --strict-host-keys`` hands the setting to the inventory it builds
    (``fleet.strict_host_keys``) and leaves the environment alone; without it,
    PODSTATE_STRICT_HOST_KEYS decides, as for a plain pyinfra run."""
    api.serve(fixture("example.json"))
    if from_env:
        env[hostkeys.STRICT_ENV] = "1"
    result = run("python", "-c", STRICT_SCRIPT, env=env)
    assert result.returncode == 0, result.stderr
    unknown, new = [hostkeys.UNKNOWN], [hostkeys.NEW]
    assert json.loads(result.stdout) == [unknown, new, unknown if from_env else new, from_env]


def test_only_skipped_pods_is_one_line(api, env):
    doc = fixture("fleet.json")
    doc["pods"] = [p for p in doc["pods"] if p["status"] != "RUNNING"]
    api.serve(doc)
    result = run("pyinfra", "inventories/pods.py", "deploy/pod.py", env=env)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("podstate: the RunPod API lists no pod podstate can manage (2 skipped)")


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("status,words", [(401, "refused RUNPOD_API_KEY"), (403, "may not list")])
def test_refused_key_is_one_line_naming_the_variable(api, env, status, words):
    problem = fixture("401.json") | {"status": status, "detail": f"bad token {KEY}"}
    apply = ["pyinfra", "-y", "inventories/pods.py", "deploy/pod.py"]
    for command in (["podstate", "inventory"], apply):
        api.queue(status, problem)
        line = one_error_line(run(*command, env=env))
        assert "RUNPOD_API_KEY" in line and words in line
        assert "<RUNPOD_API_KEY>" in line  # the key the server echoed, blanked out


def test_rate_limit_is_waited_out(api, env):
    api.serve(fixture("example.json"))
    api.queue(429, fixture("429.json"), {"Retry-After": "1"})
    started = time.monotonic()
    listing = inventory(env)
    assert time.monotonic() - started >= 1
    assert [pod["name"] for pod in listing["pods"]] == ["pytorch-training"]
    assert len(api.requests) == 2


def test_rate_limit_header_gives_the_wait_when_retry_after_is_absent(api):
    api.serve(fixture("example.json"))
    api.queue(429, fixture("429.json"), {"RateLimit": '"minute";r=0;t=2, "hour";r=9;t=900'})
    waits: list[float] = []
    raw = _settings(api).fetch(sleep=waits.append)[0]
    assert waits == [2.0]
    assert raw[0]["id"] == "7h9k2m4n6p"


def test_rate_limit_gives_up_after_bounded_tries_and_waiting(api):
    for _ in range(5):
        api.queue(429, fixture("429.json"), {"Retry-After": "4"})
    waits: list[float] = []
    with pytest.raises(
        runpod_client.InventoryError, match="rate limit: still refused after 3 tries"
    ):
        _settings(api).fetch(sleep=waits.append, max_wait=30)
    assert waits == [4.0, 4.0]
    api.queued.clear()
    api.queue(429, fixture("429.json"), {"Retry-After": "3600"})
    with pytest.raises(runpod_client.InventoryError, match="after 1 try .*3600 s"):
        _settings(api).fetch(sleep=waits.append)
    assert waits == [4.0, 4.0]  # no hour-long wait


def test_an_unavailable_api_says_so_with_the_wait_it_asked_for(api, env):
    problem = {"title": "Service Unavailable", "status": 503, "detail": "maintenance"}
    in_an_hour = email.utils.format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    api.queue(503, problem, {"Retry-After": in_an_hour})
    with pytest.raises(runpod_client.ApiUnavailable) as unavailable:
        _settings(api).fetch()
    assert unavailable.value.kind == "api-unavailable"
    assert 3000 < unavailable.value.retry_after <= 3600  # an HTTP date, read as seconds
    api.queue(503, problem)
    with pytest.raises(runpod_client.ApiUnavailable) as unavailable:
        _settings(api).fetch()
    assert unavailable.value.retry_after is None  # it said nothing
    api.queue(429, fixture("429.json"), {"Retry-After": "3600"})
    with pytest.raises(runpod_client.RateLimited) as limited:
        _settings(api).fetch()
    assert (limited.value.kind, limited.value.retry_after) == ("rate-limited", 3600)
    api.queue(401, fixture("401.json"))
    with pytest.raises(runpod_client.InventoryError) as refused:
        _settings(api).fetch()
    assert not isinstance(refused.value, runpod_client.ApiUnavailable)  # no waiting fixes it
    assert len(api.requests) == 4


def test_a_handed_listing_is_read_instead_of_the_api(api, env, tmp_path):
    listing = tmp_path / "listing.json"
    listing.write_text(json.dumps(fixture("fleet.json")))
    env["PODSTATE_API_LISTING"] = str(listing)
    names = {pod["name"] for pod in inventory(env)["pods"]}
    assert "trainer-1" in names and api.requests == []
    listing.write_text("{")
    line = one_error_line(run("podstate", "inventory", env=env))
    assert line == (
        f"podstate: PODSTATE_API_LISTING: cannot read a pod listing from {listing}: not JSON"
    )


def _settings(api: ProviderApi) -> runpod_client.RunPodClient:
    return runpod_client.settings({"RUNPOD_API_KEY": KEY, "RUNPOD_API_URL": api.url})


@pytest.mark.parametrize(
    "body,message",
    [
        (b"<html>Bad gateway</html>", "answered with something that is not JSON"),
        (b"[]", "expected an object with a 'pods' list, got a list"),
        (b'{"items": []}', "expected an object with a 'pods' list, got no 'pods' list"),
        (
            (FIXTURES / "missing-status.json").read_bytes(),
            "pods[0] (id 7h9k2m4n6p).status: missing",
        ),
        (
            (FIXTURES / "wrong-port-type.json").read_bytes(),
            "pods[0] (id 7h9k2m4n6p).ssh.direct.port: expected an integer, got a string",
        ),
        (b'{"pods": [42]}', "pods[0]: expected a pod object, got an integer"),
    ],
)
def test_malformed_answers_are_one_line(api, env, body, message):
    api.queue(200, body)
    assert message in one_error_line(run("podstate", "inventory", env=env))


def test_other_status_is_one_line(api, env):
    api.queue(500, {"title": "Internal Server Error", "status": 500, "detail": "db down"})
    line = one_error_line(run("podstate", "inventory", env=env))
    assert "answered 500 Internal Server Error: db down" in line


def test_unreachable_api_is_one_line(env):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    env["RUNPOD_API_URL"] = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    line = one_error_line(run("pyinfra", "-y", "inventories/pods.py", "deploy/pod.py", env=env))
    assert "cannot reach the RunPod API at http://127.0.0.1:" in line


def test_slow_api_times_out_in_one_line(api, env):
    api.serve(fixture("example.json"))
    api.delay = 3
    env["RUNPOD_API_TIMEOUT"] = "0.5"
    started = time.monotonic()
    line = one_error_line(run("podstate", "inventory", env=env))
    assert time.monotonic() - started < 3
    assert "no answer from the RunPod API" in line and "RUNPOD_API_TIMEOUT" in line


def test_redirects_are_not_followed_with_the_key(api, env, provider_api):
    other = provider_api("runpod")
    other.serve(fixture("example.json"))
    api.queue(302, b"", {"Location": f"{other.url}/v2/pods"})
    line = one_error_line(run("podstate", "inventory", env=env))
    assert "redirects (302)" in line and "RUNPOD_API_URL" in line
    assert other.requests == []


@pytest.mark.parametrize(
    "url,message",
    [
        ("http://api.runpod.io", "plain http is allowed for localhost only"),
        ("ftp://127.0.0.1", "expected a base URL"),
        ("https://user:pw@api.runpod.io", "expected a base URL"),
    ],
)
def test_unsafe_api_urls_are_refused_before_sending_anything(env, url, message):
    env["RUNPOD_API_URL"] = url
    assert message in one_error_line(run("podstate", "inventory", env=env))


def test_key_with_a_line_break_is_refused_without_showing_it(env):
    env["RUNPOD_API_KEY"] = f"{KEY}\nX-Evil: 1"
    line = one_error_line(run("podstate", "inventory", env=env))
    assert "RUNPOD_API_KEY contains spaces, line breaks" in line


def test_key_is_sent_to_the_api_only_and_printed_nowhere(api, env):
    api.serve(fixture("fleet.json"))
    for pod in fixture("fleet.json")["pods"]:  # a log's other lines are printed nowhere either
        api.log(pod["id"], ["token=log-secret-value", "SSH host keys:"], hold=False)
    run("podstate", "inventory", env=env)
    run("podstate", "inventory", "--json", env=env)
    _, result = debug_inventory(env, "-vvv", "--debug-all")
    assert "Loading inventory" in result.stderr + result.stdout  # debug output was on
    assert "log-secret-value" not in result.stderr + result.stdout
    assert any(r["path"].endswith("/logs") for r in api.requests)
    assert [r["path"] for r in api.requests].count("/v2/pods") == 3
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in api.requests)
    assert KEY not in repr(runpod_client.settings({"RUNPOD_API_KEY": KEY}))


# --- names, groups, host keys (no server) -------------------------------------------------


def _api_pod(pod_id: str, name: str, created: str = "2026-06-01T12:00:00Z") -> runpod_pods.ApiPod:
    return runpod_pods.ApiPod(pod_id, name, "h", 22, "root", "SECURE", None, 0, None, None, created)


def test_host_names_are_unique_and_valid():
    pods = [
        _api_pod("a1", "web"),
        _api_pod("b2", "web"),
        _api_pod("c3", "ok-name"),
        _api_pod("d4", "!!!"),
        _api_pod("e5", "web-b2"),  # valid, and the name the second "web" would get
        _api_pod("f6", "x" * 80),
    ]
    names = runpod.host_names(pods)
    assert names["a1"] == "web" and names["b2"] == "web-b2-2"
    assert names["c3"] == "ok-name"
    assert names["d4"] == "d4"
    assert names["e5"] == "web-b2"  # a pod's own valid name is never taken from it
    assert len(names["f6"]) <= 63 and names["f6"].endswith("-f6")
    assert len(set(names.values())) == len(pods)


def test_a_newcomer_never_renames_the_pod_that_had_the_name():
    old = _api_pod("zz9", "trainer", "2026-06-01T12:00:00Z")
    assert runpod.host_names([old]) == {"zz9": "trainer"}
    newer = _api_pod("aa1", "trainer", "2026-06-02T08:00:00+00:00")
    for listing in ([old, newer], [newer, old]):  # whatever order the API lists them in
        assert runpod.host_names(listing) == {"zz9": "trainer", "aa1": "trainer-aa1"}
    # the same instant written another way is not older: then the pod id decides
    twin = _api_pod("aa0", "trainer", "2026-06-01T14:00:00+02:00")
    assert runpod.host_names([old, twin])["aa0"] == "trainer"


def test_a_stopped_pod_keeps_its_name_from_a_newer_running_one(api, env):
    vars_dir = Path(env["PODSTATE_VARS"])
    write_vars(vars_dir, "host_vars/trainer.yaml", {"watch": {"hold": True}})
    old = copy.deepcopy(fixture("example.json")["pods"][0])
    old.update(id="old001", name="trainer", createdAt="2026-05-01T00:00:00Z")
    api.serve({"pods": [old]})
    first, _ = debug_inventory(env)
    assert first["trainer"]["data"]["pod_id"] == "old001"
    newer = copy.deepcopy(old)
    newer.update(id="new001", createdAt="2026-06-01T00:00:00Z")
    newer["ssh"]["direct"]["port"] += 1
    api.serve({"pods": [newer, old]})
    hosts, _ = debug_inventory(env)
    assert hosts["trainer"]["data"]["pod_id"] == "old001"  # still its own host_vars
    assert hosts["trainer"]["data"]["podstate"]["watch"] == {"hold": True}
    assert hosts["trainer-new001"]["data"]["pod_id"] == "new001"
    assert "watch" not in hosts["trainer-new001"]["data"]["podstate"]
    stopped = copy.deepcopy(old)
    stopped.update(status="EXITED", ssh={"proxy": None, "direct": None}, runtime=None)
    api.serve({"pods": [newer, stopped]})
    listing = inventory(env)
    assert [pod["name"] for pod in listing["pods"]] == ["trainer-new001"]
    assert listing["skipped"] == [
        {"id": "old001", "provider": "runpod", "name": "trainer", "reason": "status EXITED"}
    ]


def test_inventory_json_has_its_documented_fields(api, env):
    api.serve(fixture("fleet.json"))
    listing = inventory(env)
    assert set(listing) == {"source", "pods", "skipped", "notes"}
    assert all(
        set(pod) == {"name", "pod_id", "provider", "address", "port", "endpoint", "user", "groups"}
        for pod in listing["pods"]
    )
    assert all(set(item) == {"id", "provider", "name", "reason"} for item in listing["skipped"])
    documented = (ROOT / "docs" / "runpod.md").read_text()
    for fields in (
        '"source": ..., "pods": [...], "skipped": [...], "notes": [...]',
        '"name", "pod_id", "provider", "address", "port", "endpoint", "user", "groups"',
        '"id", "provider", "name", "reason"',
    ):
        assert "{" + fields + "}" in documented


def test_a_pod_without_a_creation_time_is_one_line(api, env):
    doc = copy.deepcopy(fixture("example.json"))
    doc["pods"][0]["createdAt"] = "yesterday"
    api.queue(200, json.dumps(doc).encode())
    line = one_error_line(run("podstate", "inventory", env=env))
    assert "pods[0] (id 7h9k2m4n6p).createdAt: not a date-time: yesterday" in line


@pytest.mark.parametrize(
    "gpu,group",
    [
        ("NVIDIA GeForce RTX 4090", "gpu_rtx_4090"),
        ("NVIDIA A100-SXM4-80GB", "gpu_a100_sxm4_80gb"),
        ("NVIDIA H100 80GB HBM3", "gpu_h100_80gb_hbm3"),
        ("AMD Instinct MI300X OAM", "gpu_amd_instinct_mi300x_oam"),
    ],
)
def test_gpu_groups(gpu, group):
    pod = runpod_pods.ApiPod(
        "i", "n", "h", 22, "root", "COMMUNITY", gpu, 2, "EU-RO-1", None, "2026-06-01T12:00:00Z"
    )
    assert runpod.auto_groups(pod) == ["community", "runpod", group, "dc_eu_ro_1", "gpus_2"]


def _write_key(trust: hostkeys.HostKeyTrust, key: str) -> None:
    """What paramiko's accept-new does: append the server's key."""
    with open(trust.known_hosts, "a") as handle:
        handle.write(f"{trust.address} ssh-ed25519 {key}\n")


def test_host_key_trust_follows_restarts(tmp_path):
    def plan(started: str | None, port: int = 2200) -> hostkeys.HostKeyTrust:
        return hostkeys.plan("pod1", "p", "10.0.0.1", port, started, tmp_path)

    first = plan("2026-06-01T12:00:00Z")
    assert (first.state, first.strictness) == ("new", "accept-new")
    hostkeys.record(first)
    meta = json.loads((tmp_path / "pod1.json").read_text())
    assert meta["recorded_at"] == "2026-06-01T12:00:00Z"
    _write_key(first, "AAAAold")
    same = plan("2026-06-01T12:00:00Z")
    assert (same.state, same.strictness) == ("trusted", "yes")
    assert plan("2026-06-01T11:00:00Z").state == "trusted"  # never backwards
    assert plan(None).state == "trusted"
    moved = plan("2026-06-01T12:00:00Z", port=2300)  # new address, same container
    hostkeys.record(moved)
    assert (tmp_path / "pod1.known_hosts").read_text() == "[10.0.0.1]:2300 ssh-ed25519 AAAAold\n"
    later = plan("2026-06-02T08:00:00+00:00")
    assert (later.state, later.strictness) == ("restarted", "accept-new")
    hostkeys.record(later)
    assert (tmp_path / "pod1.known_hosts").read_text() == ""
    assert "AAAAold" in (tmp_path / "pod1.known_hosts.old").read_text()
    recorded = json.loads((tmp_path / "pod1.json").read_text())["recorded_at"]
    assert recorded == "2026-06-02T08:00:00+00:00"


def test_stored_key_without_a_recorded_start_is_never_replaced(tmp_path):
    trust = hostkeys.plan("pod2", "p", "h", 22, None, tmp_path)
    hostkeys.record(trust)
    _write_key(trust, "AAAAkey")
    assert hostkeys.plan("pod2", "p", "h", 22, "2030-01-01T00:00:00Z", tmp_path).state == (
        "trusted"
    )


def test_unsafe_pod_ids_get_safe_file_names(tmp_path):
    trust = hostkeys.plan("../../etc/passwd", "p", "h", 22, None, tmp_path)
    assert trust.known_hosts.parent == tmp_path
    assert trust.known_hosts.name.startswith("id-")


def test_pyinfras_ssh_keygen_advice_names_the_store(tmp_path, caplog):
    trust = hostkeys.plan("pod3", "trainer-9", "10.0.0.3", 4000, "2026-06-01T12:00:00Z", tmp_path)
    hostkey_hints.explain_mismatches([trust])
    with caplog.at_level(logging.WARNING, logger="pyinfra"):
        logging.getLogger("pyinfra").warning("    ssh-keygen -R [10.0.0.3]:4000")
        logging.getLogger("pyinfra").warning("    ssh-keygen -R [10.0.0.9]:22")
    first, second = (record.getMessage() for record in caplog.records)
    assert f"rm {trust.known_hosts}" in first and "trainer-9" in first and "pod3" in first
    assert "no restart" in first
    assert second == "    ssh-keygen -R [10.0.0.9]:22"


# --- end to end: sandbox pods behind the tests' API ----------------------------------------


def _sandbox_pod(record: dict, name: str, started_at: str) -> dict:
    """Return a RunPod API pod object for a sandbox pod, shaped like the spec's example."""
    pod = copy.deepcopy(fixture("example.json")["pods"][0])
    port = record["port"]
    pod.update(
        id=record["pod_id"],
        name=name,
        cloud=record["cloud"],
        dataCenterId="EU-RO-1" if record["cloud"] == "SECURE" else "CA-MTL-1",
        startedAt=started_at,
    )
    pod["ssh"]["direct"] = {
        "host": "127.0.0.1",
        "port": port,
        "username": "root",
        "command": f"ssh root@127.0.0.1 -p {port}",
    }
    pod["runtime"]["ports"] = [{"private": 22, "public": port, "type": "tcp", "ip": "127.0.0.1"}]
    if record["gpus"]:
        pod["gpu"] = {"id": record["gpu_name"], "count": record["gpus"]}
    else:
        del pod["gpu"]
        pod["cpu"] = {"id": "cpu5c", "vcpuCount": 4, "memory": 16}
    return pod


@pytest.fixture(scope="module")
def live(fleet, tmp_path_factory):
    """The sandbox fleet listed by the tests' RunPod API, plus a stopped and a proxy-only pod."""
    fake = ProviderApi("runpod")
    records = json.loads((fleet.state / "pods.json").read_text())
    started = {name: "2026-06-01T12:00:00Z" for name in records}
    extra = [p for p in fixture("fleet.json")["pods"] if p["id"] in ("exit01", "prox01")]

    def publish() -> None:
        pods = [_sandbox_pod(rec, name, started[name]) for name, rec in records.items()]
        fake.serve({"pods": pods + extra})

    publish()
    fleet.host_vars("pod-3", {"shm": {"min_size": "64M"}})  # every pod can converge
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PODSTATE_", "RUNPOD_"))}
    env.update(
        RUNPOD_API_KEY=KEY,
        RUNPOD_API_URL=fake.url,
        PODSTATE_VARS=str(fleet.vars_dir),
        PODSTATE_SANDBOX=str(fleet.state),
        PODSTATE_HOSTKEYS=str(tmp_path_factory.mktemp("hostkeys")),
        PODSTATE_SSH_KEY=str(fleet.state / "id_ed25519"),
    )
    yield {"api": fake, "env": env, "records": records, "started": started, "publish": publish}
    fake.close()
    fleet.host_vars("pod-3", None)


def converge(live: dict, *flags: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    result = run(
        "pyinfra", "-y", "--json", *flags, "inventories/pods.py", "deploy/pod.py", env=live["env"]
    )
    try:
        parsed = json.loads(result.stdout[result.stdout.index("{") :])
    except ValueError:
        parsed = None
    return result, parsed


def hosts_in(parsed: dict | None, key: str) -> set[str]:
    if not parsed:
        return set()
    return {h for op in parsed["results"]["operations"] for h in op[key]}


def stored_key(live: dict, pod: str) -> str:
    pod_id = live["records"][pod]["pod_id"]
    return (Path(live["env"]["PODSTATE_HOSTKEYS"]) / f"{pod_id}.known_hosts").read_text()


def served_key(port: int) -> str:
    """Return the ed25519 host key the sshd on ``port`` presents now."""
    out = subprocess.run(
        ["ssh-keyscan", "-t", "ed25519", "-p", str(port), "127.0.0.1"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    return " ".join(out.split()[1:3])


def rotate_host_key(pod: str, port: int) -> str:
    """Give a sandbox pod a new host key, as a container restart does; return it.

    The pod's sshd re-executes itself on SIGHUP (same pid), reading the new key.
    """
    from podstate.sandbox import inside, lifecycle

    inside.pod_exec(
        pod,
        "rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub && "
        "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key",
    )
    public = inside.pod_exec(pod, "cat /etc/ssh/ssh_host_ed25519_key.pub").stdout
    new = " ".join(public.split()[:2])
    sshd = next(p for p in lifecycle.status() if p.name == pod)
    os.kill(sshd.sshd_pid, signal.SIGHUP)
    deadline = time.monotonic() + 30
    while served_key(port) != new:
        assert time.monotonic() < deadline, f"{pod}'s sshd did not pick up its new host key"
        time.sleep(0.2)
    return new


def test_e2e_first_run_trusts_on_first_use_and_converges(live, fleet):
    result, parsed = converge(live, "-v", "--debug")
    assert result.returncode == 0, result.stderr
    assert hosts_in(parsed, "success") == {"pod-1", "pod-2", "pod-3", "pod-4", "pod-5"}
    assert result.stderr.count("skipping pod exit01 (stopped-one): status EXITED") == 1
    assert "skipping pod prox01 (proxy-only): no direct SSH" in result.stderr
    for pod, record in live["records"].items():
        assert served_key(record["port"]) in stored_key(live, pod)
    assert fleet.out("pod-1", "echo $TMPDIR").strip() == "/scratch/tmp"
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in live["api"].requests)


def test_e2e_second_run_checks_keys_strictly_and_changes_nothing(live):
    hosts, _ = debug_inventory(live["env"])
    assert {h["data"]["ssh_strict_host_key_checking"] for h in hosts.values()} == {"yes"}
    result, parsed = converge(live)
    assert result.returncode == 0, result.stderr
    assert hosts_in(parsed, "success") == set()
    assert hosts_in(parsed, "no_change") == {"pod-1", "pod-2", "pod-3", "pod-4", "pod-5"}


def test_e2e_changed_key_without_restart_refuses_only_that_pod(live):
    old = stored_key(live, "pod-2")
    rotate_host_key("pod-2", live["records"]["pod-2"]["port"])
    result, parsed = converge(live)
    assert result.returncode != 0
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr
    assert "pod-2" in result.stderr and "no restart" in result.stderr
    pod_id = live["records"]["pod-2"]["pod_id"]
    assert f"rm {live['env']['PODSTATE_HOSTKEYS']}/{pod_id}.known_hosts" in result.stderr
    assert hosts_in(parsed, "no_change") == {"pod-1", "pod-3", "pod-4", "pod-5"}
    assert stored_key(live, "pod-2") == old  # the suspicious key was not recorded


def test_e2e_changed_key_after_a_reported_restart_is_accepted(live):
    live["started"]["pod-2"] = "2026-06-01T13:30:00Z"
    live["publish"]()
    result, parsed = converge(live)
    assert result.returncode == 0, result.stderr
    assert "pod-2" in hosts_in(parsed, "no_change")
    port = live["records"]["pod-2"]["port"]
    assert served_key(port) in stored_key(live, "pod-2")
    pod_id = live["records"]["pod-2"]["pod_id"]
    old = (Path(live["env"]["PODSTATE_HOSTKEYS"]) / f"{pod_id}.known_hosts.old").read_text()
    assert served_key(port) not in old and old.strip()
    meta = json.loads((Path(live["env"]["PODSTATE_HOSTKEYS"]) / f"{pod_id}.json").read_text())
    assert meta["recorded_at"] == "2026-06-01T13:30:00Z"
