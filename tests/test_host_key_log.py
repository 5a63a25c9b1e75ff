"""Host keys checked against what RunPod's own log shows, before any credential is sent.

The start script prints each host key's fingerprint; the v2 API serves the container's log
(``getPodLogs``); podstate takes a new key only if it is among them. Unit tests read logs
from the tests' provider API (the failures: 404, 500, 429, a stream that never sends a line);
the end-to-end tests use sandbox pods, whose API serves their real container logs, and a pod
made to present a key its log does not show, as an interception would.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import jsonschema
import pytest
import yaml

from podstate.inventory import hostkeys, keylog, runpod_client
from podstate.sandbox import container, inside
from tests.api_server import ProviderApi
from tests.e2e import BIN, ROOT
from tests.test_ci import REPORT_SCHEMA
from tests.test_runpod import KEY, _sandbox_pod, rotate_host_key, served_key

SANDBOX = {"pods": 2}
A = "SHA256:" + "A" * 43
B = "SHA256:" + "B" * 43
RUNPOD_LOG = [
    "Pod Started",
    "Setting up SSH...",
    "ED25519 key fingerprint:",
    f"256 {A} root@3f1c (ED25519)",
    " * Starting OpenBSD Secure Shell server sshd",
    "   ...done.",
    "SSH host keys:",
    "Key: /etc/ssh/ssh_host_ecdsa_key.pub",
    f"256 {B} root@3f1c (ECDSA)",
    "Key: /etc/ssh/ssh_host_ed25519_key.pub",
    f"256 {A} root@3f1c (ED25519)",
    "Start script(s) finished, Pod is ready to use.",
]


# --- the log's key block ----------------------------------------------------------------


def test_the_start_scripts_fingerprints_are_read_from_its_lines():
    assert keylog.fingerprints_in(RUNPOD_LOG) == [A, B]


def test_fingerprints_outside_the_key_lines_are_not_taken():
    lines = [f"256 {A} root@x (ED25519)", "Key: /etc/ssh/ssh_host_rsa_key.pub", f"256 {B} x (RSA)"]
    assert keylog.fingerprints_in(lines) == []
    assert keylog.fingerprints_in(["SSH host keys:", "Key: /x.pub", "no fingerprint"]) == []


@pytest.fixture
def api(provider_api) -> ProviderApi:
    return provider_api("runpod")


def settings(api: ProviderApi) -> runpod_client.RunPodClient:
    return runpod_client.settings({"RUNPOD_API_KEY": KEY, "RUNPOD_API_URL": api.url})


def read_in_thread(api: ProviderApi, idle: float, total: float) -> keylog.KeyLog:
    """Return pod p1's read; waits for it (a bound far above the read's own, never timed)."""
    found: list[keylog.KeyLog] = []
    thread = threading.Thread(
        target=lambda: found.append(
            keylog.read(settings(api), "p1", "2026-06-01T12:00:00Z", idle, total)
        ),
        daemon=True,
    )
    thread.start()
    thread.join(300)
    assert found, "the log read did not end"
    return found[0]


def test_a_held_stream_is_read_to_the_end_of_its_key_block(api):
    api.log("p1", RUNPOD_LOG)  # then held open with keep-alives
    read = read_in_thread(api, idle=600, total=600)  # only the block's end can stop it
    assert read == keylog.KeyLog((A, B))
    (request,) = [r for r in api.requests if r["path"] == "/v2/pods/p1/logs"]
    assert request["query"] == {"source": ["container"], "since": ["2026-06-01T12:00:00Z"]}
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"


def test_a_stream_of_keep_alives_only_ends_at_the_idle_limit_with_the_reason(api):
    api.log("p1", [])  # no line, comments every 50 ms: none of them is a line
    read = read_in_thread(api, idle=0.3, total=600)
    assert read.fingerprints == () and "no key block" in read.reason


def test_a_log_without_fingerprints_says_so(api):
    api.log("p1", ["Pod Started", "Start script(s) finished, Pod is ready to use."], hold=False)
    read = read_in_thread(api, idle=600, total=600)
    assert read.fingerprints == () and "no key block" in read.reason


@pytest.mark.parametrize("status", [404, 500, 403])
def test_an_error_answer_is_named(api, status):
    api.log_fails("p1", (status, {}))
    read = read_in_thread(api, idle=600, total=600)
    assert read.fingerprints == () and f"answered {status}" in read.reason


def test_a_rate_limit_is_waited_out_within_the_pods_time(api):
    api.log("p1", RUNPOD_LOG)
    stream = api.logs["p1"][0]
    api.log_fails("p1", (429, {"Retry-After": "0"}), (429, {"RateLimit": '"m";r=0;t=0'}))
    api.logs["p1"].append(stream)
    assert read_in_thread(api, idle=600, total=600).fingerprints == (A, B)
    assert [r["path"] for r in api.requests].count("/v2/pods/p1/logs") == 3


def test_a_rate_limit_longer_than_the_pods_time_gives_up_naming_it(api):
    api.log_fails("p1", (429, {"Retry-After": "3600"}))
    read = read_in_thread(api, idle=600, total=60)
    assert "rate-limited (429, retry after 3600 s)" in read.reason


def test_every_pods_log_is_read_at_once(api):
    """Each stream is held open after its block's end until every read has begun: a reader
    that read one pod after another would never see the second block."""
    started = threading.Barrier(3, timeout=120)
    for pod in ("p1", "p2", "p3"):
        api.log(pod, RUNPOD_LOG)
    answer = api.server.RequestHandlerClass.do_GET

    def do_get(handler) -> None:
        started.wait()  # broken, and no answer, unless all three requests are in flight
        answer(handler)

    api.server.RequestHandlerClass.do_GET = do_get
    pods = dict.fromkeys(("p1", "p2", "p3"), "2026-06-01T12:00:00Z")
    logs = keylog.read_all(settings(api), pods)
    assert {pod: log.fingerprints for pod, log in logs.items()} == dict.fromkeys(pods, (A, B))


# --- the trust planned from a log ----------------------------------------------------------


def test_a_log_makes_a_new_key_verified_even_under_strict_host_keys(tmp_path):
    trust = hostkeys.plan("p1", "pod", "10.0.0.1", 2200, "2026-06-01T12:00:00Z", tmp_path, True)
    assert trust.state == hostkeys.UNKNOWN
    with_log = hostkeys.vouched(trust, (A,), None, strict=True)
    assert (with_log.state, with_log.strictness) == (hostkeys.NEW, "accept-new")
    assert with_log.host_data()["host_key_fingerprints"] == [A]
    without = hostkeys.vouched(trust, (), "RunPod's log answered 404", strict=True)
    assert without.state == hostkeys.UNKNOWN
    assert without.host_data()["host_key_unverified"] == "RunPod's log answered 404"


# --- end to end: sandbox pods, their logs served by the sandbox's API ---------------------


def podstate_check(env: dict, out: Path) -> tuple[subprocess.CompletedProcess, dict]:
    result = subprocess.run(
        [str(BIN / "podstate"), "check", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert "Traceback" not in result.stderr, result.stderr
    document = json.loads(out.read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    return result, document


def pyinfra_apply(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )


def sessions(fleet, pod: str) -> tuple[int, int]:
    """Return what the pod's sshd has let in so far: exec requests, and logins."""
    log = (fleet.state / "pods" / pod / "sshd.log").read_text(errors="replace")
    return inside.commands_served(fleet.state)[pod], log.count("Accepted publickey")


def fingerprint_served(port: int, tmp_path: Path) -> str:
    key = tmp_path / f"served-{port}.pub"
    key.write_text(served_key(port) + "\n")
    out = subprocess.run(["ssh-keygen", "-lf", str(key)], capture_output=True, text=True)
    return out.stdout.split()[1]


def test_e2e_an_empty_store_is_checked_and_applied_with_every_key_verified(fleet, tmp_path):
    fleet.host_vars("pod-1", {"shm": {"min_size": "32M"}})
    fleet.host_vars("pod-2", {"shm": {"min_size": "32M"}})
    env = fleet.api_env(tmp_path / "store")
    result, document = podstate_check(env, tmp_path / "check.json")
    assert result.returncode in (0, 2), result.stdout + result.stderr
    trusts = {name: pod["host_key"]["trust"] for name, pod in document["pods"].items()}
    assert trusts == {"pod-1": "verified", "pod-2": "verified"}
    assert document["summary"]["host_keys"]["verified"] == 2
    assert "host keys: 2 verified against RunPod's log" in result.stdout
    fresh = fleet.api_env(tmp_path / "applied")
    applied = pyinfra_apply(fresh)
    assert applied.returncode == 0, applied.stderr
    _, after = podstate_check(fresh, tmp_path / "after.json")
    for name, pod in after["pods"].items():
        port = fleet.pods[name]["ssh_port"]
        assert pod["host_key"] == {
            "trust": "known",
            "fingerprint": fingerprint_served(port, tmp_path),
        }


def test_e2e_a_restart_is_verified_and_an_intercepted_key_refused_with_no_session(fleet, tmp_path):
    store = tmp_path / "store"
    env = fleet.api_env(store)
    first, _ = podstate_check(env, tmp_path / "first.json")
    assert first.returncode in (0, 2), first.stdout + first.stderr
    container.restart("pod-1")  # a new container, a new key, a new startedAt
    result, document = podstate_check(env, tmp_path / "restarted.json")
    key = document["pods"]["pod-1"]["host_key"]
    assert key["trust"] == "verified" and key["old_fingerprint"] != key["fingerprint"]

    # After a restart, the pod presents a key its start did not print: an interception.
    container.restart("pod-1")
    rotate_host_key("pod-1", fleet.pods["pod-1"]["ssh_port"])
    before = sessions(fleet, "pod-1")
    result, document = podstate_check(env, tmp_path / "intercepted.json")
    assert result.returncode == 1
    pod = document["pods"]["pod-1"]
    assert pod["status"] == "unreachable" and pod["host_key"]["trust"] == "refused"
    assert "not among the host keys RunPod's log shows for this container" in pod["error"]
    assert "may be intercepted" in pod["error"]
    assert document["pods"]["pod-2"]["host_key"]["trust"] == "known"
    applied = pyinfra_apply(env)
    assert applied.returncode == 1
    assert "not among the host keys RunPod's log shows" in applied.stdout + applied.stderr
    assert sessions(fleet, "pod-1") == before  # no login, no command: nothing was sent

    # On first contact too: an empty store, the same pod.
    result, document = podstate_check(fleet.api_env(tmp_path / "empty"), tmp_path / "new.json")
    assert document["pods"]["pod-1"]["host_key"]["trust"] == "refused"
    assert document["pods"]["pod-2"]["host_key"]["trust"] == "verified"
    assert sessions(fleet, "pod-1") == before
    container.restart("pod-1")  # put it right for the tests after this one


@pytest.fixture
def listed(fleet):
    """The sandbox pods listed by the tests' API, whose logs can fail."""
    env = fleet.api_env()
    api = ProviderApi("runpod", key=env["RUNPOD_API_KEY"])
    records = json.loads((fleet.state / "pods.json").read_text())
    api.serve({"pods": [_sandbox_pod(r, n, r["started_at"]) for n, r in records.items()]})
    env.update(RUNPOD_API_URL=api.url, PODSTATE_KEY_LOG_IDLE="0.5")
    yield api, env, records
    api.close()


def test_e2e_a_failing_log_falls_back_to_first_use_naming_why(listed, tmp_path):
    api, env, records = listed
    api.log(records["pod-1"]["pod_id"], [])  # a stream that never sends a line
    api.log_fails(records["pod-2"]["pod_id"], (500, {}))
    env["PODSTATE_HOSTKEYS"] = str(tmp_path / "store")
    result, document = podstate_check(env, tmp_path / "check.json")
    keys = {name: pod["host_key"] for name, pod in document["pods"].items()}
    assert {name: key["trust"] for name, key in keys.items()} == dict.fromkeys(
        ("pod-1", "pod-2"), "first-use"
    )
    assert "no key block" in keys["pod-1"]["unverified"]
    assert "answered 500" in keys["pod-2"]["unverified"]
    assert "unverified: RunPod's log answered 500" in result.stdout
    strict = dict(env, PODSTATE_HOSTKEYS=str(tmp_path / "strict"), PODSTATE_STRICT_HOST_KEYS="1")
    result, document = podstate_check(strict, tmp_path / "strict.json")
    assert result.returncode == 1
    assert {p["host_key"]["trust"] for p in document["pods"].values()} == {"refused"}


def test_e2e_a_pods_files_fingerprints_are_checked_the_same_way(fleet, tmp_path):
    pods = yaml.safe_load(fleet.pods_file.read_text())
    known = tmp_path / "known_hosts"
    known.write_text("")
    right = fingerprint_served(pods["pods"]["pod-1"]["ssh_port"], tmp_path)
    pods["defaults"]["ssh_known_hosts_file"] = str(known)
    pods["pods"]["pod-1"]["host_key_fingerprints"] = [right]
    pods["pods"]["pod-2"]["host_key_fingerprints"] = [B]
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump(pods))
    before = sessions(fleet, "pod-2")
    result, document = podstate_check(fleet.env(path), tmp_path / "check.json")
    assert result.returncode == 1
    assert document["pods"]["pod-1"]["status"] != "unreachable"
    error = document["pods"]["pod-2"]["error"]
    assert error.startswith("host key refused:") and "pods file lists for pod-2" in error
    assert sessions(fleet, "pod-2") == before
    pods["pods"]["pod-2"]["host_key_fingerprints"] = ["SHA256:short"]
    path.write_text(yaml.safe_dump(pods))
    bad = subprocess.run(
        [str(BIN / "podstate"), "check"],
        cwd=ROOT,
        env=fleet.env(path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "host_key_fingerprints: expected a list of SHA256" in (
        bad.stderr
    )
