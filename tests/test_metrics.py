"""Prometheus metrics: the fleet's gauges and the watch's counters read back with
prometheus_client's own parser, from the watch's server and from ``podstate check --metrics``;
and, end to end, a real Prometheus (Debian's ``prometheus``) that scrapes a watch over
sandbox pods and answers, through its query API, the fleet's status and cost after a restart
is put back.

Every wait is for an event: a pass's line, a value Prometheus has taken in.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import prometheus_client
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from podstate.check.result import STATUSES, PodResult
from podstate.sandbox import container
from podstate.sandbox.api import list_pods
from podstate.watch import metrics
from podstate.watch.hooks import Applied, Pass, PodView
from podstate.watch.options import WatchError
from tests.conftest import cannot_run_e2e
from tests.e2e import BIN, ROOT, Fleet, Watching, apply

SANDBOX = {"pods": 2}
Samples = dict[tuple[str, frozenset], float]


def read(text: str) -> Samples:
    """Return every sample of an exposition, by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def text_of(pods: dict[str, PodView]) -> str:
    """Return the gauges of ``pods`` as the watch and the check expose them."""
    registry = prometheus_client.CollectorRegistry()
    registry.register(metrics.Fleet(pods))
    return prometheus_client.generate_latest(registry).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str) -> tuple[str, str]:
    """Return the body and content type at ``url``."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode(), answer.headers["Content-Type"]


FLEET = {
    "a": PodView("ok", "runpod", ("community", "trainers"), 0.5, idle=True),
    "b": PodView("drift", "runpod", ("community",), 1.25),
    "c": PodView("unreachable", "vast", ("trainers",), None, idle=True),
    "d": PodView("strange", "file", (), 2.0),  # a status the gauges do not know: an error
    "e": PodView(None, "runpod", ("community",), 1.0),  # not checked yet: in the costs only
}


def test_each_pod_counts_once_by_status_and_provider_and_once_in_each_of_its_groups():
    samples = read(text_of(FLEET))
    assert value(samples, "podstate_pods", status="ok", provider="runpod") == 1
    assert value(samples, "podstate_pods", status="drift", provider="runpod") == 1
    assert value(samples, "podstate_pods", status="unreachable", provider="vast") == 1
    assert value(samples, "podstate_pods", status="error", provider="file") == 1
    assert value(samples, "podstate_pods", status="busy", provider="runpod") == 0  # not absent
    pods = [v for (n, _), v in samples.items() if n == "podstate_pods"]
    assert (len(pods), sum(pods)) == (3 * len(STATUSES), 4)
    assert value(samples, "podstate_group_pods", group="trainers", status="ok", provider="runpod")
    grouped = {dict(k)["group"]: 0.0 for (n, k) in samples if n == "podstate_group_pods"}
    for (name, labels), count in samples.items():
        if name == "podstate_group_pods":
            grouped[dict(labels)["group"]] += count
    assert grouped == {"community": 2, "trainers": 2}


def test_the_costs_are_those_of_known_price_with_the_unknown_counted_apart():
    samples = read(text_of(FLEET))
    assert value(samples, "podstate_fleet_cost_dollars_per_hour") == 4.75
    assert value(samples, "podstate_pods_price_unknown") == 1
    assert value(samples, "podstate_idle_cost_dollars_per_hour") == 0.5


def test_a_pass_counts_what_it_did_and_how_long_it_took():
    watched = metrics.Metrics()
    applied = (
        Applied("a", "restarted", None, 40.0, ready_after=95.0),
        Applied("b", "drift", "Permission denied", 3.0, first_failure=True),
        Applied("c", "restarted", None, 20.0),  # no start time known: no duration
    )
    watched.passed(Pass(3, 1_780_000_000.0, 47.0, FLEET, None, applied, (("a", 0.5),)))
    watched.passed(Pass(4, 1_780_000_030.0, 2.0, FLEET, None, (), (("e", None),)))
    samples = read(prometheus_client.generate_latest(watched.registry).decode())
    assert value(samples, "podstate_restarts_put_back_total") == 2
    assert value(samples, "podstate_applies_total") == 3
    assert value(samples, "podstate_apply_failures_total") == 1
    assert value(samples, "podstate_idle_stops_total") == 2
    assert value(samples, "podstate_idle_stop_saved_dollars_per_hour_total") == 0.5
    assert value(samples, "podstate_restart_to_ready_seconds_count") == 1
    assert value(samples, "podstate_restart_to_ready_seconds_sum") == 95.0
    assert value(samples, "podstate_restart_to_ready_seconds_bucket", le="60.0") == 0
    assert value(samples, "podstate_restart_to_ready_seconds_bucket", le="120.0") == 1
    assert value(samples, "podstate_pass_duration_seconds_count") == 2
    assert value(samples, "podstate_pass_duration_seconds_sum") == 49.0
    assert value(samples, "podstate_last_pass_completed_timestamp_seconds") == 1_780_000_030.0
    assert value(samples, "podstate_pods", status="ok", provider="runpod") == 1
    assert not any("pod" in dict(labels) for _, labels in samples)  # no label names a pod
    global_names = {m.name for m in prometheus_client.REGISTRY.collect()}
    assert not {n for n in global_names if n.startswith("podstate")}  # a registry of its own


def test_the_server_serves_the_metrics_and_the_latest_checks_page():
    served = metrics.Metrics.serve("127.0.0.1", free_port())
    try:
        base = f"http://127.0.0.1:{served.server.server_port}"
        report = {"a": {**PodResult("ok").to_json(), "cost_per_hour": 0.5}}
        served.passed(Pass(1, 1_780_000_000.0, 1.0, FLEET, report))
        body, kind = fetch(base + "/metrics")
        assert kind.startswith("text/plain")
        assert value(read(body), "podstate_pods", status="drift", provider="runpod") == 1
        page = metrics.page(_document(report, "2026-05-28T20:26:40Z"))  # the pass's end
        body, kind = fetch(base + "/")
        if page is None:  # no page maker: / serves the metrics
            assert value(read(body), "podstate_pods", status="ok", provider="runpod") == 1
        else:
            assert kind == "text/html; charset=utf-8" and body == page
            assert "checked 2026-05-28 20:26:40 UTC" in body
    finally:
        served.close()


def _document(report: dict, checked_at: str | None = None) -> dict:
    from podstate.check import result

    return result.to_json(result.from_json({"pods": report}), checked_at=checked_at)


@pytest.mark.parametrize("address", ["::1", "[::1]", "localhost"])
def test_the_server_listens_on_an_ipv6_address_or_a_name(address):
    served = metrics.Metrics.serve(address, 0)
    try:
        host = "[::1]" if "::" in address else "localhost"
        body, _ = fetch(f"http://{host}:{served.server.server_port}/metrics")
        assert "# TYPE podstate_" in body
    finally:
        served.close()


def test_an_address_that_names_nothing_is_one_line():
    with pytest.raises(WatchError) as raised:
        metrics.Metrics.serve("no-such-host.invalid", 9100)
    assert str(raised.value).startswith("--metrics-port 9100: cannot listen on no-such-host.")
    assert "\n" not in str(raised.value)


def test_a_port_already_taken_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(WatchError) as raised:
            metrics.Metrics.serve("127.0.0.1", port)
    assert str(raised.value) == (
        f"--metrics-port {port}: cannot listen on 127.0.0.1: Address already in use"
    )


def test_check_writes_the_gauges_for_node_exporter_in_one_step(tmp_path):
    """A real ``podstate check --metrics`` over two pods nothing answers for: their status,
    provider, groups and price, in the textfile collector's format, no file left beside."""
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        yaml.safe_dump(
            {
                "pods": {
                    "lost-1": {"ssh_hostname": "127.0.0.1", "ssh_port": free_port()},
                    "lost-2": {
                        "ssh_hostname": "127.0.0.1",
                        "ssh_port": free_port(),
                        "provider": "vast",
                        "cost_per_hour": 0.4,
                        "groups": ["trainers"],
                    },
                }
            }
        )
    )
    out = tmp_path / "collector" / "podstate.prom"
    out.parent.mkdir()
    env = {**os.environ, "PODSTATE_PODS": str(pods), "PODSTATE_VARS": str(ROOT / "inventories")}
    command = [str(BIN / "podstate"), "check", "--metrics", str(out)]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr  # unreachable pods
    samples = read(out.read_text())
    assert value(samples, "podstate_pods", status="unreachable", provider="file") == 1
    assert value(samples, "podstate_pods", status="unreachable", provider="vast") == 1
    labels = {"group": "trainers", "status": "unreachable", "provider": "vast"}
    assert value(samples, "podstate_group_pods", **labels) == 1
    groups = {dict(k)["group"] for (n, k) in samples if n == "podstate_group_pods"}
    assert groups == {"community", "trainers", "vast"}  # not pyinfra's group of the file
    assert value(samples, "podstate_fleet_cost_dollars_per_hour") == 0.4
    assert value(samples, "podstate_pods_price_unknown") == 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["podstate.prom"]
    missing = tmp_path / "nowhere" / "podstate.prom"
    command[-1] = str(missing)
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout) == (1, "")  # refused before any pod is contacted
    assert run.stderr == (
        f"podstate: cannot write the report {missing}: no directory {missing.parent}\n"
    )


# --- end to end: a real Prometheus -----------------------------------------------------------


def query(base: str, promql: str) -> float | None:
    """Return the one value Prometheus's query API gives for ``promql``, None for none."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    answer = json.loads(fetch(url)[0])
    assert answer["status"] == "success", answer
    found = answer["data"]["result"]
    return float(found[0]["value"][1]) if found else None


def until(base: str, promql: str, wanted: float, within: float = 60) -> float | None:
    """Ask Prometheus for ``promql`` until it gives ``wanted`` (it scrapes every second and
    takes the samples in as it does); return the last answer. ``within`` bounds a Prometheus
    that never gets there, it is not what the test waits for."""
    deadline = time.monotonic() + within
    while (got := query(base, promql)) != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
    return got


@pytest.fixture
def prometheus(tmp_path):
    """Start Debian's prometheus binary on a free port, with a config of the test's own
    scraping ``target`` every second; return (its URL, the watch's metrics port)."""
    binary = shutil.which("prometheus")
    if binary is None:
        cannot_run_e2e("no prometheus (Debian's package: make deps)")
    port, target = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "podstate",
                        "static_configs": [{"targets": [f"127.0.0.1:{target}"]}],
                    }
                ],
            }
        )
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        yield f"http://127.0.0.1:{port}", target
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_prometheus_reads_the_fleets_status_and_cost_after_a_restart_put_back(
    fleet: Fleet, tmp_path, prometheus
):
    base, port = prometheus
    store = tmp_path / "hostkeys"
    env = fleet.api_env(store)
    assert apply(fleet, env=env).returncode == 0  # converged, host keys trusted
    price = sum(pod["cost"] for pod in list_pods(fleet.state)["pods"])
    watching = Watching(fleet, "--metrics-port", str(port), env=env)
    try:
        watching.end_of_pass(1)  # checked: both ok
        container.restart("pod-1")
        watching.signal(signal.SIGHUP)
        watching.end_of_pass(2)  # pod-1 put back
        assert until(base, "podstate_restarts_put_back_total", 1) == 1
        assert until(base, 'sum(podstate_pods{status="ok"})', 2) == 2
        assert query(base, 'sum(podstate_pods{status="restarted"})') == 0
        assert query(base, "podstate_fleet_cost_dollars_per_hour") == pytest.approx(price)
        assert query(base, "podstate_restart_to_ready_seconds_count") == 1
        assert query(base, "podstate_pass_duration_seconds_count") == 2
        watching.signal(signal.SIGTERM)
        assert watching.finish() == 0, watching.stderr()
    finally:
        watching.stop()
    put_back = [e for e in watching.events if e["action"] == "apply" and e["result"] == "ok"]
    assert [(e["pod"], e["seen"], e["pass"]) for e in put_back] == [("pod-1", "restarted", 2)]


def test_every_metric_served_is_named_in_the_docs():
    """docs/watch.md names each metric the watch serves, exactly."""
    served = metrics.Metrics()
    served.passed(Pass(1, 1.0, 1.0, FLEET))
    names = {
        family.name.removesuffix("_total") if family.type == "counter" else family.name
        for family in text_string_to_metric_families(
            prometheus_client.generate_latest(served.registry).decode()
        )
    }
    page = (ROOT / "docs" / "watch.md").read_text()
    shown = {n for n in names if f"`{n}`" in page or f"`{n}_total`" in page}
    assert names == shown, names - shown


def test_the_hooks_keep_each_pods_status_and_since_when_it_is_unreachable(tmp_path):
    """What the loop tells the hooks becomes each pass's record: only the pods the watch
    watches (its shard's), a failed try of an unreachable pod keeps it unreachable, and a
    fleet's event within a pass (a state file not written) does not end the pass."""
    from podstate.inventory.podsfile import Pod
    from podstate.watch.decisions import Event, Pending
    from podstate.watch.hooks import Hooks
    from podstate.watch.loop import Watch
    from podstate.watch.options import Options

    records: list[Pass] = []

    class Kept:
        def passed(self, seen: Pass) -> None:
            records.append(seen)

    watch = Watch(Options(deploys=["deploy/pod.py"], state=str(tmp_path / "state.json")))
    watch.hooks = Hooks([Kept()])
    pods = [Pod(n, {"provider": "runpod", "cost_per_hour": 1.0}, ["g"]) for n in "abc"]
    watch.present = {"a", "b"}  # c is another shard's

    def one_pass(statuses: dict[str, str], *events: Event) -> Pass:
        watch.number += 1
        for event in events:
            watch.emit(event)
        watch.hooks.passed(watch, pods, None, statuses)
        watch.emit(Event(None, "pass", "list", "done", 1.0))
        return records[-1]

    first = one_pass(
        {"a": "unreachable", "b": "ok"},
        Event("b", "idle", "stop", "ok"),
        Event(None, "state", "none", "failed", detail="cannot write the watch state"),
    )
    assert set(first.pods) == {"a", "b"} and first.unreachable == {"a": 1}
    assert [pod for pod, _ in first.stopped] == ["b"]
    watch.pending["a"] = Pending("unreachable", failures=2)
    failed = Event("a", "unreachable", "apply", "failed", 2.0, "Could not connect")
    second = one_pass({"a": "error"}, failed)
    assert second.pods["a"].status == "unreachable" and second.unreachable == {"a": 1}
    assert [(x.pod, x.error, x.first_failure) for x in second.applied] == [
        ("a", "Could not connect", False)
    ]
    third = one_pass({"a": "ok"}, Event("a", "unreachable", "apply", "ok", 2.0))
    assert third.unreachable == {} and third.pods["a"].status == "ok"
    assert [r.number for r in records] == [1, 2, 3]


def test_a_hook_that_fails_fails_no_pass(capsys):
    from podstate.watch.decisions import Event
    from podstate.watch.hooks import Hooks

    class Broken:
        def passed(self, seen: Pass) -> None:
            raise KeyError("status")

    kept: list[Pass] = []

    class Kept:
        def passed(self, seen: Pass) -> None:
            kept.append(seen)

    hooks = Hooks([Broken(), Kept()])
    hooks.seen = Pass(7, 0.0, 0.0, FLEET)
    hooks.event(Event(None, "pass", "list", "done", 1.0))  # returns
    assert [p.number for p in kept] == [7]
    assert capsys.readouterr().err == "podstate: Broken failed on pass 7: KeyError('status')\n"
