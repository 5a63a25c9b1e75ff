"""``podstate check --markdown``: the report's shape, grouping, escaping and size (no pods:
the verdicts are built directly; tests/test_ci.py produces the report from sandbox pods);
and the JUnit report from the same verdicts, against Jenkins' strict schema."""

import json

import jsonschema

from podstate.check import markdown as report_markdown
from podstate.check import reports
from podstate.check.result import PodResult, to_json
from tests.e2e import ROOT, junit_errors

REPORT_SCHEMA = json.loads((ROOT / "schema/check-report.schema.json").read_text())
PROFILE_DIFF = (
    "--- /etc/profile.d/podstate.sh (pod)\n+++ /etc/profile.d/podstate.sh (desired)\n"
    "@@ -1,2 +1,2 @@\n-export PIP_CACHE_DIR=/workspace/pip\n+export PIP_CACHE_DIR=/scratch/pip\n"
)
SHM = "/dev/shm is 64M, below the minimum 16G: DataLoader workers die with 'Bus error'"


def drift(diff: str = PROFILE_DIFF) -> PodResult:
    change = {
        "role": "Environment",
        "operation": "Profile /etc/profile.d/podstate.sh",
        "file": "deploy/pod.py",
        "diff": diff,
    }
    return PodResult(status="drift", changes=[change], checked=["Environment"])


def violation() -> PodResult:
    found = {"role": "Shared memory", "message": SHM}
    return PodResult(status="violation", violations=[found], checked=["Shared memory"])


def unreachable() -> PodResult:
    return PodResult(status="unreachable", error="Could not connect (timed out)")


def fleet_of_200() -> dict[str, PodResult]:
    """200 pods: 31 with a violation, 60 drifted (two distinct diffs), 9 unreachable."""
    results: dict[str, PodResult] = {}
    for number in range(200):
        name = f"trainer-{number:03d}"
        if number < 31:
            results[name] = violation()
        elif number < 91:
            results[name] = drift(PROFILE_DIFF if number % 2 else PROFILE_DIFF.replace("pip", "uv"))
        elif number < 100:
            results[name] = unreachable()
        else:
            results[name] = PodResult(checked=["Environment"])
    return results


def test_200_pods_with_three_kinds_of_findings_stay_under_200_lines():
    md = report_markdown.markdown(fleet_of_200())
    lines = md.splitlines()
    assert len(lines) < 200, md
    assert lines[0] == (
        "### podstate check: 60 drift, 31 violation, 9 unreachable (200 pods, exit 1)"
    )
    # identical findings are one line naming their pods, never a line per pod
    (shm,) = [line for line in lines if "Shared memory" in line]
    assert "31 pods: trainer-000, trainer-001" in shm and "and 11 more" in shm
    (profile,) = [line for line in lines if line.startswith("- **drift**")]
    assert "60 pods" in profile
    assert md.count("<details>") == 2  # two distinct diffs, each folded once
    assert md.count("+export PIP_CACHE_DIR=/scratch/pip") == 1
    assert "| ok | 100 pods: trainer-100" in md
    (errors,) = [line for line in lines if line.startswith("- **unreachable**")]
    assert "9 pods" in errors


def test_a_findings_id_is_shown_with_its_role():
    results = {"pod-3": violation()}
    results["pod-3"].violations[0]["id"] = "shm.min_size"
    md = report_markdown.markdown(results)
    assert "- **violation** Shared memory · shm.min\\_size: /dev/shm is 64M" in md


def test_500_pods_grow_with_findings_not_pods():
    results = fleet_of_200()
    results.update({f"extra-{n}": violation() for n in range(300)})
    assert len(report_markdown.markdown(results).splitlines()) < 100


def test_small_fleet_has_one_line_per_pod_with_a_status_word():
    results = {"pod-1": drift(), "pod-2": PodResult(), "pod-3": violation(), "pod-4": unreachable()}
    results["pod-2"].host_key = {"trust": "first-use", "fingerprint": "SHA256:abc"}
    md = report_markdown.markdown(results)
    rows = [line for line in md.splitlines() if line.startswith("| pod-")]
    assert [row.split(" | ")[1] for row in rows] == ["drift", "ok", "violation", "unreachable"]
    assert "nothing would change; host key trusted on first use" in rows[1]
    assert "- trusted on first use (unverified: nothing stored to compare with): 1 pod: pod-2" in md


def test_rekeyed_and_refused_keys_are_named_with_fingerprints():
    results = {"a": PodResult(), "b": PodResult(status="unreachable", error="host key refused: x")}
    results["a"].host_key = {
        "trust": "rekeyed",
        "fingerprint": "SHA256:new",
        "old_fingerprint": "SHA256:old",
    }
    results["b"].host_key = {"trust": "refused", "fingerprint": "SHA256:kept", "reason": "x"}
    md = report_markdown.markdown(results)
    assert "- re-keyed after a restart RunPod reported (unverified): 1 pod: a" in md
    assert "  - a: `SHA256:old` → `SHA256:new`" in md
    assert "- refused: 1 pod: b" in md
    assert "- **unreachable** host key refused: x: 1 pod: b" in md


def test_pod_text_cannot_inject_markdown_or_html():
    hostile = drift(PROFILE_DIFF + "+```\n+</details><img src=x onerror=alert(1)>\n")
    hostile.changes[0]["operation"] = "Profile <script>alert(1)</script> | x"
    bad = PodResult(status="error", error="boom\x1b]0;owned\x07 <b>bold</b> **x**")
    md = report_markdown.markdown({"pod-1": hostile, "pod-2": bad})
    assert "<script>" not in md and "<b>" not in md and "\x1b" not in md
    assert "&lt;script&gt;" in md and "\\*\\*x\\*\\*" in md and "\\x1b" in md
    assert "````diff" in md  # the fence outgrows the diff's own backticks
    body = md.split("````diff\n")[1].split("\n````")[0]
    assert "+</details><img src=x onerror=alert(1)>" in body  # inside the code block only


def test_a_secret_files_diff_is_in_no_report():
    result = drift("-token=old-secret-value\n+token=new-secret-value\n")
    result.changes[0]["secret"] = True
    results = {"pod-1": result}
    md = report_markdown.markdown(results)
    document = to_json(results)
    outputs = [md, json.dumps(document), reports.table(results, diff=True), reports.junit(results)]
    assert not [out for out in outputs if "secret-value" in out]
    assert "its diff is never shown" in md
    assert document["pods"]["pod-1"]["changes"][0]["operation"]


def test_json_report_with_host_keys_validates():
    results = fleet_of_200()
    results["trainer-100"].host_key = {
        "trust": "first-use",
        "fingerprint": "SHA256:abc",
        "unverified": "RunPod's log answered 404 Not Found",
    }
    results["trainer-102"].host_key = {"trust": "verified", "fingerprint": "SHA256:log"}
    results["trainer-101"].host_key = {
        "trust": "rekeyed",
        "fingerprint": "SHA256:new",
        "old_fingerprint": "SHA256:old",
    }
    document = to_json(results)
    jsonschema.validate(document, REPORT_SCHEMA)
    counts = {"verified": 1, "first_use": 1, "rekeyed": 1, "refused": 0}
    assert document["summary"]["host_keys"] == counts
    table = reports.table(results, diff=False)
    assert "host key re-keyed after a restart: SHA256:old -> SHA256:new\n" in table
    assert "host key verified against RunPod's log: SHA256:log" in table
    unverified = "SHA256:abc (unverified: RunPod's log answered 404 Not Found)"
    assert f"host key trusted on first use: {unverified}" in table
    assert table.endswith(
        "host keys: 1 verified against RunPod's log, 1 trusted on first use, "
        "1 re-keyed after a restart\n"
    )
    md = report_markdown.markdown(results)
    assert "- verified against RunPod's log of the container's start: 1 pod: trainer-102" in md
    junit = reports.junit(results)
    assert "host key verified against RunPod's log: SHA256:log" in junit


def test_junit_of_every_kind_of_case_is_valid_against_jenkins_strict_schema():
    waived = PodResult(checked=["GPU"], stale_waivers=["waiver for shm.min_size expired"])
    waived.waived = [
        {
            "role": "GPU",
            "id": "gpu.healthy",
            "message": "GPU 3 (NVIDIA H100 80GB HBM3): hardware thermal slowdown active",
            "until": "2026-12-31",
            "reason": "known thermal issue, ticket 1234",
        }
    ]
    waived.host_key = {"trust": "first-use", "fingerprint": "SHA256:abc"}
    hostile = drift(PROFILE_DIFF + "+\x1b]0;owned\x07 <b>x</b>\n")
    results = {"a": hostile, "b": violation(), "c": unreachable(), "d": waived, "e": PodResult()}
    xml = reports.junit(results)
    assert junit_errors(xml) == []
    assert '<skipped message="waived until 2026-12-31: known thermal issue' in xml
    assert '<testsuite name="podstate check" tests="6" failures="2" errors="1" skipped="1">' in xml
