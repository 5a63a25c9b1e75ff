"""End to end: GPU fitness findings, each on the right pod only, from the one probe.

``inside.gpu_fault`` turns a running sandbox pod into a bad GPU host (its stand-in
nvidia-smi answers from the pod's layout file; podstate.sandbox.shapes.GPU_FAULTS):
pod-1 (COMMUNITY, 2 GPUs over PCIe) after a host driver update (NVML version mismatch),
pod-2 (8x H100) with a thermally throttled GPU, pod-3 with an old driver, pod-4 with an ECC
error and a narrowed PCIe link, pod-5 a CPU pod asked for a GPU.
"""

import contextlib
import datetime
import http.server
import json
import threading
import time

import pytest

from podstate.sandbox import inside
from tests.e2e import apply, check, junit_errors

PROFILE = "/etc/profile.d/podstate.sh"
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"


@pytest.fixture(scope="module")
def converged(fleet):
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    assert "NCCL_P2P_DISABLE=1" in fleet.out("pod-1", f"cat {PROFILE}")
    return fleet


@pytest.fixture(scope="module")
def unfit(converged, tmp_path_factory):
    fleet = converged
    inside.gpu_fault("pod-1", "nvml-mismatch")
    inside.gpu_fault("pod-2", "thermal", index=3)
    inside.gpu_fault("pod-3", "old-driver")
    inside.gpu_fault("pod-4", "pcie", index=0)
    inside.gpu_fault("pod-4", "ecc", index=1)
    requirements = {
        "pod-1": {"count": 2},
        "pod-2": {"count": 8, "model": "*H100*", "min_memory": "80G", "healthy": True},
        "pod-3": {"min_driver": "555.42", "min_cuda": "12.4"},
        "pod-4": {"healthy": True, "max_temperature": 85},
        "pod-5": {"count": 1},
    }
    for pod, gpu in requirements.items():
        extra = {"shm": {"min_size": "32M"}} if pod == "pod-3" else {}
        fleet.host_vars(pod, {"gpu": gpu, **extra})
    report = tmp_path_factory.mktemp("fitness") / "report.json"
    result = check(fleet, "--json", str(report))
    assert report.exists(), result.stdout + result.stderr
    return fleet, apply(fleet), result, json.loads(report.read_text())


def findings_of(document: dict, pod: str) -> dict[str, str]:
    return {v["id"]: v["message"] for v in document["pods"][pod]["violations"]}


def test_each_finding_is_on_its_pod_only(unfit):
    _, _, result, document = unfit
    assert result.returncode == 1
    assert {pod: set(findings_of(document, pod)) for pod in document["pods"]} == {
        "pod-1": {"gpu.unreadable"},
        "pod-2": {"gpu.healthy"},
        "pod-3": {"gpu.min_driver"},
        "pod-4": {"gpu.healthy"},
        "pod-5": {"gpu.count"},
    }


def test_messages_name_the_gpu_the_reading_and_what_to_do(unfit):
    _, _, _, document = unfit
    assert findings_of(document, "pod-2")["gpu.healthy"] == (
        "GPU 3 (NVIDIA H100 80GB HBM3): hardware thermal slowdown active at 91 °C: the host "
        "is throttling; recreate the pod on another host"
    )
    pod4 = findings_of(document, "pod-4")["gpu.healthy"]
    assert "GPU 0 (NVIDIA H100 80GB HBM3): PCIe link at x8 of x16" in pod4
    assert "GPU 1 (NVIDIA H100 80GB HBM3): 2 uncorrected ECC error(s)" in pod4
    assert (
        "driver is 535.54.03, older than 555.42" in findings_of(document, "pod-3")["gpu.min_driver"]
    )
    assert (
        "0 GPU(s) (nvidia-smi is not on the pod: a CPU pod), not 1"
        in findings_of(document, "pod-5")["gpu.count"]
    )
    assert MISMATCH in findings_of(document, "pod-1")["gpu.unreadable"]


def test_unreadable_gpus_keep_the_nccl_guard(unfit):
    fleet, run, result, document = unfit
    assert document["pods"]["pod-1"]["changes"] == []
    assert "NCCL_P2P_DISABLE=1" in fleet.out("pod-1", f"cat {PROFILE}")
    assert fleet.out("pod-1", "echo $NCCL_P2P_DISABLE").strip() == "1"
    assert run.returncode == 1
    assert all(f"[pod-{n}] violation: gpu." in run.stderr for n in range(1, 6))
    assert "gpu.unreadable: nvidia-smi fails on this pod" in run.stderr


def test_a_pod_that_came_back_without_gpus(converged, unfit, tmp_path):
    fleet = converged
    inside.gpu_fault("pod-4", "no-gpus")
    fleet.host_vars("pod-4", {"gpu": {"count": 2}})
    result = check(fleet, "--json", str(tmp_path / "r.json"), "--limit", "pod-4")
    found = findings_of(json.loads((tmp_path / "r.json").read_text()), "pod-4")
    assert found == {"gpu.count": "the pod has 0 GPU(s), not 2: recreate the pod on another host"}
    assert result.returncode == 1


class _Files(http.server.BaseHTTPRequestHandler):
    """``/fast`` streams as fast as the link goes; ``/slow`` 64 KiB every 0.1 s (5 Mbit/s)."""

    def do_GET(self) -> None:  # http.server's API
        self.send_response(200)
        self.send_header("Content-Length", str(1 << 30))
        self.end_headers()
        chunk = b"\0" * (64 << 10)
        with contextlib.suppress(OSError):
            for _ in range(1 << 14):
                self.wfile.write(chunk)
                if self.path == "/slow":
                    time.sleep(0.1)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def files_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_download_speed_and_free_space(converged, unfit, files_server, tmp_path):
    fleet = converged
    fast, slow = f"{files_server}/fast", f"{files_server}/slow"
    fleet.host_vars("pod-2", {"download": {"url": fast, "min_mbps": 50, "seconds": 1}})
    fleet.host_vars("pod-4", {"download": {"url": slow, "min_mbps": 50, "seconds": 1}})
    fleet.host_vars("pod-5", {"disk": {"min_free": {"/": "1P", "/workspace": "1K"}}})
    report = tmp_path / "r.json"
    result = check(
        fleet, "--json", str(report), "--limit", "pod-2", "--limit", "pod-4", "--limit", "pod-5"
    )
    assert report.exists(), result.stdout + result.stderr
    document = json.loads(report.read_text())
    assert findings_of(document, "pod-2") == {}
    slow_found = findings_of(document, "pod-4")
    assert set(slow_found) == {"download.min_mbps"}
    assert f"downloading {slow} ran at " in slow_found["download.min_mbps"]
    assert "below 50 Mbit/s" in slow_found["download.min_mbps"]
    assert list(findings_of(document, "pod-5")) == ["disk.min_free./"]
    assert "less than 1P" in findings_of(document, "pod-5")["disk.min_free./"]


def test_a_waiver_holds_a_finding_back_until_its_day(converged, unfit, tmp_path):
    """Dates relative to today: one waiver running, one expired, one matching nothing."""
    fleet = converged
    today = datetime.date.today()
    soon, past = today + datetime.timedelta(days=10), today - datetime.timedelta(days=1)
    gpu = {"count": 8, "healthy": True}
    reason = "host in EU-RO-1: known thermal issue, ticket 1234"
    fleet.host_vars(
        "pod-2",
        {
            "gpu": gpu,
            "waivers": [
                {"finding": "gpu.healthy", "until": soon.isoformat(), "reason": reason},
                {"finding": "shm.min_size", "until": soon.isoformat(), "reason": "unused"},
            ],
        },
    )
    fleet.host_vars(
        "pod-4",
        {
            "gpu": {"count": 2},  # it came back without GPUs (above)
            "waivers": [{"finding": "gpu.*", "until": past.isoformat(), "reason": "old"}],
        },
    )
    report, xml = tmp_path / "r.json", tmp_path / "r.xml"
    result = check(
        fleet, "--json", str(report), "--junit", str(xml), "--limit", "pod-2", "--limit", "pod-4"
    )
    pods = json.loads(report.read_text())["pods"]
    assert pods["pod-2"]["status"] == "ok", result.stdout
    assert [(w["id"], w["until"], w["reason"]) for w in pods["pod-2"]["waived"]] == [
        ("gpu.healthy", soon.isoformat(), reason)
    ]
    assert pods["pod-2"]["stale_waivers"] == [
        f"waiver for shm.min_size (until {soon}) matched nothing"
    ]
    assert pods["pod-4"]["status"] == "violation"
    assert pods["pod-4"]["stale_waivers"] == [f"waiver for gpu.* expired on {past}"]
    assert f"waived (gpu.healthy) until {soon}, {reason}" in result.stdout
    assert 'name="waived gpu.healthy"' in xml.read_text() and "<skipped" in xml.read_text()
    assert junit_errors(xml) == []
    run = apply(fleet, "--limit", "pod-2")
    assert run.returncode == 0, run.stderr
    assert f"note: waived gpu.healthy until {soon} ({reason})" in run.stderr


def test_a_waiver_more_than_90_days_ahead_is_refused_before_contact(converged):
    fleet = converged
    late = (datetime.date.today() + datetime.timedelta(days=91)).isoformat()
    fleet.host_vars(
        "pod-2", {"waivers": [{"finding": "gpu.healthy", "until": late, "reason": "x"}]}
    )
    result = check(fleet)
    assert result.returncode == 1
    assert f"waivers.0.until: {late} is more than 90 days ahead" in result.stderr
    fleet.host_vars("pod-2", None)
