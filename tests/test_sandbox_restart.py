"""Sandbox pods restart as RunPod pods do, and the sandbox serves a RunPod API, end to end.

``container.restart`` wipes a pod's container disk, keeps its volume, runs the start script
again (a new host key among it) on the same port, and moves the pod's ``startedAt``, which
the sandbox's RunPod API reports. Through that API, podstate's host-key store accepts the
new key; through the pods file, the changed key is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from podstate.sandbox import container, inside, lifecycle
from podstate.sandbox.api import api_env
from podstate.sandbox.shapes import shape_for
from podstate.sandbox.state import SandboxError, parse_rfc3339
from tests.e2e import BIN, ROOT, apply
from tests.test_runpod import PROBLEM, assert_valid, served_key

SANDBOX = {"pods": 2}  # pod-1: COMMUNITY, sshfs volume; pod-2: SECURE, local volume


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The host-key store of the API inventory's user, kept for the whole module."""
    return tmp_path_factory.mktemp("hostkeys")


def get(fleet, path: str = "/v2/pods", key: str | None = "") -> tuple[int, dict]:
    """Return the status and JSON body of a GET to the sandbox API, with its own key
    (``key=""``), another one, or none (``None``)."""
    env = api_env(fleet.state)
    headers = {}
    if key is not None:
        headers["Authorization"] = f"Bearer {key or env['RUNPOD_API_KEY']}"
    request = urllib.request.Request(env["RUNPOD_API_URL"] + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def api_pods(fleet) -> dict[str, dict]:
    """Return the API's pod documents by name, once the answer validates against the spec."""
    status, doc = get(fleet)
    assert status == 200
    assert_valid(doc)
    return {pod["name"]: pod for pod in doc["pods"]}


def records(fleet) -> dict[str, dict]:
    return json.loads((fleet.state / "pods.json").read_text())


def podstate(fleet, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "podstate"), *args],
        cwd=ROOT,
        env=env or fleet.env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def pod_key(fleet, pod: str) -> str:
    """Return the host key the sandbox recorded for the pod's current start."""
    return " ".join((fleet.state / "pods" / pod / "known_hosts").read_text().split()[1:3])


# --- the API --------------------------------------------------------------------------------


def test_api_lists_every_pod_as_runpod_does(fleet):
    pods = api_pods(fleet)
    assert list(pods) == ["pod-1", "pod-2"]
    for name, record in records(fleet).items():
        pod = pods[name]
        shape = shape_for(record["number"])
        assert pod["id"] == record["pod_id"]
        assert (pod["status"], pod["cloud"]) == ("RUNNING", shape.cloud)
        assert pod["ssh"]["direct"] == {
            "host": "127.0.0.1",
            "port": record["port"],
            "username": "root",
            "command": f"ssh root@127.0.0.1 -p {record['port']}",
        }
        assert pod["runtime"]["ports"] == [
            {"private": 22, "public": record["port"], "type": "tcp", "ip": "127.0.0.1"}
        ]
        assert pod["startedAt"] == record["started_at"] == pod["createdAt"]
        assert pod["gpu"] == {"id": shape.gpu_name, "count": shape.gpus}
    assert pods["pod-1"]["mounts"] == {
        "network": [{"volumeId": f"vol{pods['pod-1']['id']}", "path": "/workspace"}]
    }
    assert pods["pod-2"]["mounts"] == {"persistent": {"size": 20, "path": "/workspace"}}
    assert (pods["pod-1"]["dataCenterId"], pods["pod-2"]["dataCenterId"]) == ("CA-MTL-1", "EU-RO-1")


def test_api_wants_the_bearer_key(fleet):
    for key, detail in [(None, "missing bearer token"), ("rpa_wrong", "invalid API key")]:
        status, body = get(fleet, key=key)
        assert status == 401
        assert not list(PROBLEM.iter_errors(body)), body
        assert body["detail"] == detail
    assert get(fleet, "/v2/endpoints")[0] == 404
    assert (fleet.state / "api_key").stat().st_mode & 0o777 == 0o600


def test_api_inventory_has_the_pods_files_hosts(fleet, store):
    from_file = json.loads(podstate(fleet, "inventory", "--json").stdout)
    result = podstate(fleet, "inventory", "--json", env=fleet.api_env(store))
    assert result.returncode == 0, result.stderr
    from_api = json.loads(result.stdout)
    assert from_api["skipped"] == []
    assert len(from_api["pods"]) == len(from_file["pods"]) == 2
    for api, listed in zip(from_api["pods"], from_file["pods"], strict=True):
        same = ("name", "address", "port", "user")
        assert {k: api[k] for k in same} == {k: listed[k] for k in same}
        assert api["groups"][:1] == listed["groups"]  # the cloud group, then RunPod's data
        assert api["pod_id"] == records(fleet)[api["name"]]["pod_id"]
    assert from_api["pods"][0]["groups"] == [
        "community",
        "runpod",
        "gpu_rtx_4090",
        "dc_ca_mtl_1",
        "gpus_2",
    ]
    assert from_api["pods"][1]["groups"] == [
        "secure",
        "runpod",
        "gpu_h100_80gb_hbm3",
        "dc_eu_ro_1",
        "gpus_8",
    ]


def test_apply_through_the_api_converges_every_pod(fleet, store):
    run = apply(fleet, env=fleet.api_env(store))
    assert run.returncode == 0, run.stderr
    assert run.hosts("success") == {"pod-1", "pod-2"}
    for record in records(fleet).values():
        assert served_key(record["port"]) in (store / f"{record['pod_id']}.known_hosts").read_text()


# --- a restart ------------------------------------------------------------------------------


def test_restart_wipes_the_container_disk_and_keeps_the_volume(fleet):
    blob = os.urandom(1 << 20)
    for pod in ("pod-1", "pod-2"):
        fleet.out(pod, "echo mine > /root/probe && echo mine > /etc/probe")
        fleet.out(pod, "mkdir -p /workspace/data && cat > /workspace/data/blob", blob)
    assert fleet.out("pod-1", "test -d /scratch/tmp && cat /etc/profile.d/podstate.sh")
    before = records(fleet)["pod-1"]
    old_key = served_key(before["port"])
    started = api_pods(fleet)["pod-1"]["startedAt"]
    served = inside.commands_served(fleet.state)

    container.restart("pod-1")

    after = records(fleet)["pod-1"]
    assert after["port"] == before["port"] and after["pid"] != before["pid"]
    assert [(p.name, p.running, p.pid) for p in lifecycle.status()] == [
        ("pod-1", True, after["pid"]),
        ("pod-2", True, records(fleet)["pod-2"]["pid"]),
    ]
    gone = "for p in /root/probe /etc/probe /etc/profile.d/podstate.sh /scratch; do "
    gone += 'test -e "$p" && echo "$p"; done; true'
    assert fleet.out("pod-1", gone) == ""
    assert fleet.out("pod-2", "cat /root/probe /etc/probe") == "mine\nmine\n"  # not restarted
    digest = hashlib.sha256(blob).hexdigest()
    assert fleet.out("pod-1", "sha256sum < /workspace/data/blob").split()[0] == digest
    backing = fleet.state / "storage" / "pod-1" / "data" / "blob"  # the network volume
    assert backing.read_bytes() == blob

    # the start script ran again, once
    env = fleet.out("pod-1", "cat /etc/rp_environment")
    assert env.count(f'export RUNPOD_POD_ID="{after["pod_id"]}"\n') == 1
    bashrc = fleet.out("pod-1", "cat /root/.bashrc")
    assert bashrc.endswith("\nsource /etc/rp_environment\n")
    assert bashrc.count("source /etc/rp_environment") == 1
    client_key = " ".join((fleet.state / "id_ed25519.pub").read_text().split()[:2])
    assert fleet.out("pod-1", "cat /root/.ssh/authorized_keys") == client_key + "\n"

    # a new host key, which the sandbox's ssh knows and the pods file does not
    new_key = served_key(after["port"])
    assert new_key.startswith("ssh-ed25519 ") and new_key != old_key
    assert pod_key(fleet, "pod-1") == new_key
    assert old_key in (fleet.state / "known_hosts").read_text()
    assert new_key not in (fleet.state / "known_hosts").read_text()

    # startedAt moved to the restart, in pods.json and in the API's answer
    moved = api_pods(fleet)["pod-1"]
    assert moved["startedAt"] == after["started_at"]
    assert parse_rfc3339(moved["startedAt"]) > parse_rfc3339(started)
    assert moved["startedAt"].endswith("Z")
    assert moved["createdAt"] == before["created_at"]
    assert api_pods(fleet)["pod-2"]["startedAt"] == records(fleet)["pod-2"]["started_at"]

    # the exec count goes on from where it was: the sshd log outlives the container
    now = inside.commands_served(fleet.state)
    assert now["pod-1"] == served["pod-1"] + 5  # the five checks since the restart
    fleet.out("pod-1", "true")
    assert inside.commands_served(fleet.state)["pod-1"] == now["pod-1"] + 1


def test_api_inventory_accepts_the_new_key_after_the_restart(fleet, store):
    pod_id = records(fleet)["pod-1"]["pod_id"]
    old = (store / f"{pod_id}.known_hosts").read_text()
    run = apply(fleet, env=fleet.api_env(store))
    assert run.returncode == 0, run.stderr
    assert run.hosts("success") == {"pod-1"}  # put back what the restart wiped; pod-2 as it was
    assert run.hosts("no_change") == {"pod-1", "pod-2"}
    assert pod_key(fleet, "pod-1") in (store / f"{pod_id}.known_hosts").read_text()
    assert (store / f"{pod_id}.known_hosts.old").read_text() == old
    meta = json.loads((store / f"{pod_id}.json").read_text())
    assert meta["recorded_at"] == records(fleet)["pod-1"]["started_at"]
    assert fleet.out("pod-1", "echo $TMPDIR").strip() == "/scratch/tmp"


def test_pods_file_refuses_the_new_key(fleet):
    run = apply(fleet)
    assert run.returncode != 0
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in run.stderr
    assert "pod-1" in run.stderr
    assert run.hosts("no_change") == {"pod-2"}
    assert "pod-1" not in run.hosts("success") | run.hosts("no_change")


# --- the start command ----------------------------------------------------------------------


def test_start_command_runs_at_every_start_before_the_start_script(fleet):
    container.set_start_command(
        "pod-2",
        "key=$(test -e /etc/ssh/ssh_host_ed25519_key && echo host-key || echo no-host-key)\n"
        'echo "$RUNPOD_POD_ID $HOME $(hostname) $key" >> /workspace/starts',
    )
    fleet.out("pod-2", "rm -f /workspace/starts")
    container.restart("pod-2")
    container.restart("pod-2")
    pod_id = records(fleet)["pod-2"]["pod_id"]
    line = f"{pod_id} /root pod-2 no-host-key\n"
    assert fleet.out("pod-2", "cat /workspace/starts") == line * 2
    container.set_start_command("pod-2", None)
    container.restart("pod-2")
    assert fleet.out("pod-2", "cat /workspace/starts") == line * 2


def test_start_command_can_put_the_host_key_back(fleet):
    port = records(fleet)["pod-2"]["port"]
    key = served_key(port)
    fleet.out(
        "pod-2", "mkdir -p /workspace/keys && cp -p /etc/ssh/ssh_host_ed25519_key* /workspace/keys/"
    )
    container.set_start_command("pod-2", "cp -p /workspace/keys/* /etc/ssh/")
    try:
        container.restart("pod-2")
    finally:
        container.set_start_command("pod-2", None)
    assert served_key(port) == key == pod_key(fleet, "pod-2")
    assert fleet.out("pod-2", "test -e /root/probe || echo wiped") == "wiped\n"


def test_failing_start_command_leaves_the_pod_exited_until_restarted(fleet, store):
    container.set_start_command("pod-2", "echo 'no luck' >&2; exit 3")
    try:
        with pytest.raises(SandboxError, match=r"pod-2 did not start: .*exit status 3"):
            container.restart("pod-2")
    finally:
        container.set_start_command("pod-2", None)
    assert [p.running for p in lifecycle.status()] == [True, False]
    pods = api_pods(fleet)
    assert pods["pod-2"]["status"] == "EXITED"
    assert pods["pod-2"]["ssh"]["direct"] is None and pods["pod-2"]["runtime"] is None
    result = podstate(fleet, "inventory", "--names", env=fleet.api_env(store))
    assert result.returncode == 0 and result.stdout == "pod-1\n"
    container.restart("pod-2")  # a stopped pod starts again
    assert api_pods(fleet)["pod-2"]["status"] == "RUNNING"
    assert fleet.out("pod-2", "hostname") == "pod-2\n"


# --- the command line -----------------------------------------------------------------------


def test_cli_restarts_a_pod_and_points_podstate_at_the_api(fleet):
    missing = podstate(fleet, "sandbox", "restart")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == (
        "podstate: podstate sandbox restart: name the pod to restart: "
        "podstate sandbox restart POD\n"
    )
    unknown = podstate(fleet, "sandbox", "restart", "pod-9")
    assert unknown.returncode == 1 and unknown.stderr == "podstate: no sandbox pod named 'pod-9'\n"
    started = records(fleet)["pod-1"]["started_at"]
    result = podstate(fleet, "sandbox", "restart", "pod-1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pod-1 restarted: ")
    assert parse_rfc3339(records(fleet)["pod-1"]["started_at"]) > parse_rfc3339(started)

    api = podstate(fleet, "sandbox", "api")
    assert api.returncode == 0, api.stderr
    assert api_env(fleet.state)["RUNPOD_API_KEY"] not in api.stdout
    listing = subprocess.run(
        ["sh", "-c", f'eval "$({BIN}/podstate sandbox api)" && {BIN}/podstate inventory --names'],
        cwd=ROOT,
        env=fleet.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout == "pod-1\npod-2\n"
