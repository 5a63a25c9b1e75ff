"""The restart benchmark's pure parts: its RunPod API answer, its figures and its report."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from bench.restart.api import proxied_document, spec_errors
from bench.restart.report import report, summary
from podstate.sandbox.api import pod_document
from podstate.sandbox.processes import proc_start


def _listing(port: int) -> dict:
    record = {
        "number": 1,
        "port": port,
        "pid": os.getpid(),  # a running pod: this process stands for its sshd
        "pid_start": proc_start(os.getpid()),
        "pod_id": "abc123",
        "created_at": "2026-06-01T12:00:00.000Z",
        "started_at": "2026-06-01T12:05:00.000Z",
    }
    now = datetime(2026, 6, 1, 12, 10, tzinfo=UTC)
    return {"pods": [pod_document("pod-1", record, "4G", now)]}


def test_the_api_answer_points_at_the_proxy_and_is_runpods():
    doc = proxied_document(_listing(20001), {20001: 41234})
    (pod,) = doc["pods"]
    assert pod["ssh"]["direct"]["port"] == 41234
    assert pod["ssh"]["direct"]["command"] == "ssh root@127.0.0.1 -p 41234"
    assert pod["runtime"]["ports"][0]["public"] == 41234
    assert pod["startedAt"] == "2026-06-01T12:05:00.000Z"
    assert spec_errors(doc) == []


def test_an_answer_the_api_could_not_send_is_named():
    doc = proxied_document(_listing(20001), {20001: 41234})
    doc["pods"][0]["ssh"]["direct"]["port"] = "41234"
    assert [e for e in spec_errors(doc) if e.startswith("pods/0/ssh/direct:")]


def _raw(times: list[float | None], applies: list[float]) -> dict:
    pods = {
        f"pod-{n}": {"seconds": t, "wait_s": None if t is None else t - 3.0, "pass": 2}
        for n, t in enumerate(times, 1)
    }
    return {
        "settings": {"pods": 24, "rtt_ms": 150.0, "restarted": 6, "interval_s": 30.0,
                     "poll_s": 0.2, "cycles": 1},
        "machine": {"cores": 2, "cpu": "cpu", "memory_gib": 4, "kernel": "6", "python": "3.11",
                    "pyinfra": "3", "paramiko": "4"},
        "started": "2026-06-01 12:00 UTC",
        "load_before": 0.5,
        "references": [{"apply": {"seconds": s, "commands": {"max": 2}}} for s in applies],
        "cycles": [{"lead_s": 29.0, "pods": pods}],
    }  # fmt: skip


def test_the_figures_are_the_median_and_max_against_interval_plus_one_apply():
    s = summary(_raw([10.0, 20.0, 33.0], [3.0, 5.0]))
    assert (s["median_s"], s["max_s"], s["reference_apply_s"], s["floor_s"]) == (20, 33, 4, 34)
    assert s["max_ratio"] == 33 / 34 and s["met"]
    text = report(_raw([10.0, 20.0, 33.0], [3.0, 5.0]))
    assert "| restarted pods, max | 33.0 |" in text
    assert "| 1 | 29 | pod-3 | 2 | 30.0 | 3.0 | 33.0 |" in text
    assert "**met**" in text


def test_a_pod_never_ready_leaves_the_max_unknown_and_the_target_unmet():
    s = summary(_raw([10.0, None], [3.0]))
    assert s["max_s"] is None and s["not_ready"] == 1 and not s["met"]
    assert s["median_s"] == 10.0
    text = report(_raw([10.0, None], [3.0]))
    assert "| restarted pods, max | – |" in text
    assert "**not met** (1 of 2 not ready)" in text
    assert not summary(_raw([46.0], [3.0]))["met"]
