"""The check's reports for the terminal and JUnit, from the check's verdicts
(``podstate.check.result``; its JSON form is there too).

Every writer shows a change's diff through ``shown_diff``, so a file marked secret never has
its content in any report; and every pod's host-key outcome
(``podstate.inventory.hostkeys.outcome``) the same way: trusted on first use, re-keyed after
a restart, or refused.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from typing import Any

from podstate.check import usage
from podstate.check.result import STATUSES, PodResult, host_key_counts, summary
from podstate.inventory import hostkeys
from podstate.terminal import visible


def shown_diff(change: dict[str, Any]) -> str | None:
    """Return the diff a report may show for ``change``: None for a file marked secret.

    The hook for secret files: a change carrying ``"secret": true`` (its operation uploads
    a secret) is reported by name only, in every report, since its diff would be the secret.
    """
    if change.get("secret"):
        return None
    return change.get("diff") or None


def host_key_line(host_key: dict[str, Any] | None) -> str | None:
    """Return one line saying what the run did with a pod's key, or None when there is
    nothing to say (a kept key, no store, or a refusal, which the pod's error already says).
    """
    if not host_key:
        return None
    trust = host_key.get("trust")
    why = host_key.get("unverified")
    unverified = f" (unverified: {why})" if why else ""
    if trust == hostkeys.VERIFIED:
        return f"host key verified against RunPod's log: {host_key['fingerprint']}"
    if trust == hostkeys.FIRST_USE:
        return f"host key trusted on first use: {host_key['fingerprint']}{unverified}"
    if trust == hostkeys.REKEYED:
        old = host_key.get("old_fingerprint") or "no key"
        return f"host key re-keyed after a restart: {old} -> {host_key['fingerprint']}{unverified}"
    return None


def restart_line(result: PodResult) -> str:
    """Return when the pod restarted, in words, for a restarted pod's reports."""
    restarted = result.restarted or {}
    since = f"at {restarted['since']}" if restarted.get("since") else "at a time no API gave"
    applied = restarted.get("applied_at") or "an earlier apply"
    if restarted.get("gone"):  # the container disk was kept (Vast): what the start left
        gone = ", ".join(restarted["gone"])
        return f"container started again {since}, after podstate applied at {applied}; gone: {gone}"
    return f"container re-created {since}, after podstate applied at {applied}"


def busy_line(result: PodResult) -> str:
    """Return, for a busy pod's reports, who is changing it and what to do."""
    return f"another podstate run is changing it ({result.holder}): check again later"


def boot_lines(boot: dict[str, Any] | None, quiet: bool = False) -> list[str]:
    """Return what the boot hook did at a pod's container start, one line per finding; none
    when no hook is asked for or podstate set it up in this container (and, ``quiet``,
    when it restored everything)."""
    if not boot or boot["outcome"] == "armed":
        return []
    said = {
        "not-run": f"boot hook did not run at this container's start: {boot['reason']}",
        "skipped": f"boot hook did nothing at this container's start: {boot['reason']}",
        "running": "boot hook is still restoring the venv",
        "restored": f"boot hook restored the pod at {boot['started_at']}",
    }
    lines = [said[boot["outcome"]]] if boot["outcome"] in said else []
    if quiet and boot["outcome"] == "restored":
        lines = []
    lines += [f"boot hook left for the next apply: {item}" for item in boot["pending"]]
    return lines + [f"boot hook error: {error}" for error in boot["errors"]]


def boot_failed(boot: dict[str, Any] | None) -> bool:
    """Return whether the boot hook failed at the pod's container start: it did not run,
    did nothing, or something in it failed."""
    if not boot:
        return False
    return boot["outcome"] in ("not-run", "skipped") or bool(boot["errors"])


def host_key_summary(results: dict[str, PodResult]) -> str | None:
    """Return the line that counts the keys trusted for the first time, re-keyed or refused
    in this run, or None when every key was already stored and kept."""
    counts = host_key_counts(results)
    words = {
        "verified": "verified against RunPod's log",
        "first_use": "trusted on first use",
        "rekeyed": "re-keyed after a restart",
        "refused": "refused",
    }
    parts = [f"{counts[k]} {words[k]}" for k in words if counts[k]]
    return f"host keys: {', '.join(parts)}" if parts else None


def table(results: dict[str, PodResult], diff: bool) -> str:
    """Return the terminal report: one line per pod, details indented below it."""
    out = io.StringIO()
    width = max([len(n) for n in results] + [3])
    for name, r in sorted(results.items()):
        detail = {
            "ok": "nothing would change",
            "drift": f"{len(r.changes)} change(s)",
            "restarted": f"{restart_line(r)}: {len(r.changes)} change(s) to put back",
            "violation": f"{len(r.violations)} violation(s)",
            "busy": busy_line(r),
        }.get(r.status, r.error or "")
        detail = "; ".join(part for part in (detail, usage.pod_line(r)) if part)
        out.write(f"{name:<{width}}  {r.status:<11}  {detail}\n")
        line = host_key_line(r.host_key)
        if line:
            out.write(f"    {line}\n")
        for line in boot_lines(r.boot):
            out.write(f"    {line}\n")
        for change in r.changes:
            out.write(f"    would change: {change['role']} | {change['operation']}\n")
            text = shown_diff(change)
            if diff and text:
                out.write("".join(f"      {line}\n" for line in text.splitlines()))
        for v in r.violations:
            out.write(f"    violation ({v['role']}): {v['message']}\n")
        for w in r.waived:
            out.write(f"    waived ({w['id']}) until {w['until']}, {w['reason']}: {w['message']}\n")
        for note in r.stale_waivers:
            out.write(f"    stale {note}\n")
    s = summary(results)
    counts = ", ".join(f"{s[k]} {k}" for k in STATUSES)
    out.write(f"{counts}; {usage.fleet_line(results)}; exit {s['exit_code']}\n")
    keys = host_key_summary(results)
    if keys:
        out.write(keys + "\n")
    return visible(out.getvalue())


def junit(results: dict[str, PodResult]) -> str:
    """Return JUnit XML: a test case per pod and role (or other deploy file); drift and
    violations fail, errors err, a busy pod's one case is skipped. A pod whose key podstate
    keeps has a ``Host key`` case too, whose output says when the key was trusted on first
    use or re-keyed; a refused key is the pod's connection error. Valid against Jenkins'
    strict JUnit schema (junit-10.xsd)."""
    suites = ET.Element("testsuites", name="podstate check")
    suite = ET.SubElement(suites, "testsuite", name="podstate check")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, r in sorted(results.items()):
        if r.status in ("unreachable", "error"):
            case = ET.SubElement(suite, "testcase", classname=name, name="connection")
            error = visible(r.error or "")
            ET.SubElement(case, "error", message=f"{r.status}: {error}").text = error
            counts["tests"] += 1
            counts["errors"] += 1
            continue
        if r.status == "busy":  # not checked: what was read was halfway through a change
            case = ET.SubElement(suite, "testcase", classname=name, name="podstate check")
            line = visible(f"busy: {busy_line(r)}")
            ET.SubElement(case, "skipped", message=line).text = line
            counts["tests"] += 1
            counts["skipped"] += 1
            continue
        if r.restarted:
            case = ET.SubElement(suite, "testcase", classname=name, name="Restart")
            line = visible(restart_line(r))
            ET.SubElement(case, "failure", message=line, type="restarted").text = line
            counts["tests"] += 1
            counts["failures"] += 1
        if r.boot is not None:
            case = ET.SubElement(suite, "testcase", classname=name, name="Boot hook")
            counts["tests"] += 1
            lines = visible("\n".join(boot_lines(r.boot)))
            if boot_failed(r.boot):
                counts["failures"] += 1
                ET.SubElement(
                    case, "failure", message=lines.splitlines()[0], type="boot"
                ).text = lines
            elif lines:
                ET.SubElement(case, "system-out").text = lines
        if r.host_key is not None:
            case = ET.SubElement(suite, "testcase", classname=name, name="Host key")
            counts["tests"] += 1
            key_line = host_key_line(r.host_key)
            if key_line:
                ET.SubElement(case, "system-out").text = visible(key_line)
        found = {c["role"] for c in r.changes} | {v["role"] for v in r.violations}
        for role in r.checked + sorted(found - set(r.checked)):
            case = ET.SubElement(suite, "testcase", classname=name, name=role)
            counts["tests"] += 1
            problems = [f"violation: {v['message']}" for v in r.violations if v["role"] == role]
            problems += [
                f"drift: {c['operation']}\n{shown_diff(c) or ''}".rstrip()
                for c in r.changes
                if c["role"] == role
            ]
            if problems:
                counts["failures"] += 1
                ET.SubElement(
                    case,
                    "failure",
                    message=visible(problems[0].splitlines()[0]),
                    type="violation" if problems[0].startswith("violation") else "drift",
                ).text = visible("\n\n".join(problems))
        for w in r.waived:
            case = ET.SubElement(suite, "testcase", classname=name, name=f"waived {w['id']}")
            ET.SubElement(
                case, "skipped", message=visible(f"waived until {w['until']}: {w['reason']}")
            ).text = visible(w["message"])
            counts["tests"] += 1
            counts["skipped"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
        if key != "skipped":  # Jenkins' strict schema (junit-10.xsd) has it on testsuite only
            suites.set(key, str(value))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
