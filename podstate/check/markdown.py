"""``podstate check --markdown PATH``: a compact report for a CI job summary or a PR comment.

People read the job summary (``$GITHUB_STEP_SUMMARY``) or a pull request comment first, as
with Terraform plans, so this report is short at any fleet size:

* a headline with the counts and the exit status, and what happened to host keys;
* one line per pod with its status word, or, past ``POD_LINES`` pods, one line per status
  naming its pods;
* drift, violations and errors grouped by finding: identical findings on many pods are one
  line naming the pods ("31 pods: ..."), never one line per pod;
* diffs folded in ``<details>``, identical diffs shown once, never the diff of a secret file
  (``reports.shown_diff``).

Everything from a pod (names, messages, errors, diffs) is escaped, so a hostile pod cannot
inject Markdown or HTML into the page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from typing import Any

from podstate.check import usage
from podstate.check.reports import boot_lines, busy_line, restart_line, shown_diff
from podstate.check.result import STATUSES, PodResult, summary
from podstate.inventory import hostkeys
from podstate.terminal import visible

POD_LINES = 50  # up to this many pods, one line each; more, one line per status
NAMES_SHOWN = 20  # pod names listed on a grouped line before "and N more"
DIFF_LINES = 60  # lines of one diff shown before it is cut
DIFFS_SHOWN = 3  # distinct diffs shown for one change before the rest are only counted
TEXT_CHARS = 300  # characters of one message or error shown

_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def text(value: str, limit: int = TEXT_CHARS) -> str:
    """Return ``value`` as inline Markdown that shows it literally: on one line, control
    characters made visible, HTML and Markdown characters escaped, cut at ``limit``."""
    flat = " ".join(visible(value).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return _SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))


def names(pods: Iterable[str]) -> str:
    """Return pod names as one inline list: all of them up to ``NAMES_SHOWN``, then a count."""
    listed = sorted(pods)
    shown = ", ".join(text(name, 80) for name in listed[:NAMES_SHOWN])
    more = len(listed) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def _grouped(
    results: dict[str, PodResult], keys: Callable[[PodResult], Iterable[Any]]
) -> dict[Any, list[str]]:
    """Return the pods of each key ``keys`` gives for a pod, keys in first-seen order."""
    groups: dict[Any, list[str]] = {}
    for name, result in sorted(results.items()):
        for key in dict.fromkeys(keys(result)):
            groups.setdefault(key, []).append(name)
    return groups


def _headline(results: dict[str, PodResult]) -> list[str]:
    s = summary(results)
    worst = [f"{s[k]} {k}" for k in STATUSES[1:] if s[k]]
    verdict = ", ".join(worst) if worst else "no drift"
    return [
        f"### podstate check: {verdict} ({_pods(s['pods'])}, exit {s['exit_code']})",
        "",
        " · ".join([*(f"{k} {s[k]}" for k in STATUSES), usage.fleet_line(results)]),
        "",
    ]


def _host_keys(results: dict[str, PodResult]) -> list[str]:
    """Return the lines naming the pods whose key was trusted for the first time, re-keyed or
    refused in this run; none when every key was already stored and kept."""
    what = {
        hostkeys.VERIFIED: "verified against RunPod's log of the container's start",
        hostkeys.FIRST_USE: "trusted on first use (unverified: nothing stored to compare with)",
        hostkeys.REKEYED: "re-keyed after a restart RunPod reported (unverified)",
        hostkeys.REFUSED: "refused",
    }
    groups = _grouped(results, lambda r: [(r.host_key or {}).get("trust")])
    lines = []
    for trust, words in what.items():
        pods = groups.get(trust, [])
        if not pods:
            continue
        lines.append(f"- {words}: {_pods(len(pods))}: {names(pods)}")
        if trust == hostkeys.REKEYED and len(pods) <= NAMES_SHOWN:
            for pod in pods:
                key = results[pod].host_key or {}
                old, new = key.get("old_fingerprint") or "no key", key.get("fingerprint")
                lines.append(f"  - {text(pod, 80)}: `{old}` → `{new}`")
    return ["#### Host keys", "", *lines, ""] if lines else []


def _detail(result: PodResult) -> str:
    if result.status == "drift":
        detail = f"{len(result.changes)} change(s)"
    elif result.status == "restarted":
        detail = f"{text(restart_line(result), 160)}; {len(result.changes)} change(s) to put back"
    elif result.status == "violation":
        detail = f"{len(result.violations)} violation(s)"
        detail += f", {len(result.changes)} change(s)" if result.changes else ""
    elif result.status == "ok":
        detail = "nothing would change"
    elif result.status == "busy":
        detail = text(busy_line(result), 160)
    else:
        detail = text(result.error or "", 120)
    trust = (result.host_key or {}).get("trust")
    why = (result.host_key or {}).get("unverified")
    why = f" (unverified: {text(why, 120)})" if why else ""
    if trust == hostkeys.FIRST_USE:
        detail += f"; host key trusted on first use{why}"
    elif trust == hostkeys.REKEYED:
        detail += f"; host key re-keyed after a restart{why}"
    return detail


def _pod_lines(results: dict[str, PodResult]) -> list[str]:
    """Return one line per pod with its status word, or past ``POD_LINES`` pods one line
    per status naming its pods."""
    if len(results) <= POD_LINES:
        rows = [
            f"| {text(n, 80)} | {r.status} | {_detail(r)} | {usage.pod_line(r)} |"
            for n, r in sorted(results.items())
        ]
        header = ["| pod | status | detail | cost |", "|---|---|---|---|"]
        return ["#### Pods", "", *header, *rows, ""]
    groups = _grouped(results, lambda r: [r.status])
    rows = [
        f"| {s} | {_pods(len(groups[s]))}: {names(groups[s])} |" for s in STATUSES if s in groups
    ]
    return ["#### Pods", "", "| status | pods |", "|---|---|", *rows, ""]


def _fence(body: str) -> str:
    """Return a code fence longer than any run of backticks in ``body``."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    return "`" * max(3, longest + 1)


def _diff_block(diff: str, pods: list[str]) -> list[str]:
    lines = visible(diff).splitlines()
    cut = len(lines) - DIFF_LINES
    body = "\n".join(lines[:DIFF_LINES] + ([f"… {cut} more lines"] if cut > 0 else []))
    fence = _fence(body)
    return [
        f"<details><summary>diff: {_pods(len(pods))}: {names(pods)}</summary>",
        "",
        f"{fence}diff",
        body,
        fence,
        "",
        "</details>",
        "",
    ]


def _findings(results: dict[str, PodResult]) -> list[str]:
    """Return violations, errors and drift, each identical finding once with its pods, each
    drift followed by its distinct diffs, folded."""
    lines: list[str] = []
    violations = _grouped(
        results,
        lambda r: [(v["role"], v.get("id") or "", v["message"]) for v in r.violations],
    )
    for (role, finding, message), pods in violations.items():
        label = f"{text(role)} · {text(finding)}" if finding else text(role)
        lines += [f"- **violation** {label}: {text(message)}: {_pods(len(pods))}: {names(pods)}"]
    waived = _grouped(
        results,
        lambda r: (
            [(w["id"], w["until"], w["reason"]) for w in r.waived]
            + [("stale waiver", "", note) for note in r.stale_waivers]
        ),
    )
    for (finding, until, reason), pods in waived.items():
        when = f" until {until}" if until else ""
        lines.append(
            f"- **waived** {text(finding)}{when}: {text(reason)}: {_pods(len(pods))}: {names(pods)}"
        )
    for line, pods in _grouped(results, lambda r: boot_lines(r.boot, quiet=True)).items():
        lines.append(f"- **boot** {text(line)}: {_pods(len(pods))}: {names(pods)}")
    errors = _grouped(
        results,
        lambda r: [(r.status, r.error or "")] if r.status in ("unreachable", "error") else [],
    )
    for (status, error), pods in errors.items():
        lines.append(f"- **{status}** {text(error)}: {_pods(len(pods))}: {names(pods)}")
    for line, pods in _grouped(results, lambda r: [busy_line(r)] if r.holder else []).items():
        lines.append(f"- **busy** {text(line)}: {_pods(len(pods))}: {names(pods)}")
    changes = _grouped(results, lambda r: [(c["role"], c["operation"]) for c in r.changes])
    for (role, operation), pods in changes.items():
        lines.append(
            f"- **drift** {text(role)} · {text(operation)}: {_pods(len(pods))}: {names(pods)}"
        )
        diffs: dict[str, list[str]] = {}
        secret = False
        for pod in pods:
            for change in results[pod].changes:
                if (change["role"], change["operation"]) != (role, operation):
                    continue
                secret = secret or bool(change.get("secret"))
                diff = shown_diff(change)
                if diff:
                    diffs.setdefault(diff, []).append(pod)
        if secret:
            lines.append("  - a secret file: its diff is never shown")
        blocks: list[str] = []
        for diff, with_it in list(diffs.items())[:DIFFS_SHOWN]:
            blocks += _diff_block(diff, with_it)
        if len(diffs) > DIFFS_SHOWN:
            blocks += [f"{len(diffs) - DIFFS_SHOWN} more distinct diffs: see the JSON report", ""]
        lines += ["", *blocks] if blocks else []
    if not lines:
        return []
    return ["#### Findings", "", *lines, ""]


def markdown(results: dict[str, PodResult]) -> str:
    """Return the Markdown report of a check: headline, host keys, pods, grouped findings.

    Its length grows with the number of distinct findings, not with the number of pods.
    """
    lines = _headline(results) + _host_keys(results) + _pod_lines(results) + _findings(results)
    return "\n".join(lines).rstrip("\n") + "\n"
