"""``podstate check --html PATH``: the fleet at a glance, as one self-contained page.

A rendering of the JSON report (``schema/check-report.schema.json``), as the Markdown one is:
the totals (pods by status, the fleet's cost per hour, what the idle pods cost), then one row
per pod, worst first: its status, what would change, its violations with what to do, its price
per hour, since when it is idle, and whether its GPUs are fit; then each distinct diff once.

The page needs no network and runs nothing: its style is inline, it has no script, font or
image, and its Content-Security-Policy forbids loading anything, so it opens the same from a
CI artifact, a file on disk, or ``podstate watch``'s metrics port (``/``). Everything that
comes from a pod or the desired state (names, messages, errors, diffs) is written through
``_text``: control characters made visible, then ``html.escape``d, so it is text, never markup.
"""

from __future__ import annotations

import html
from typing import Any

from podstate.check import reports, usage
from podstate.check.result import STATUSES, PodResult, from_json
from podstate.terminal import visible

CHECKED = ("ok", "drift", "restarted", "violation")  # statuses of a pod that was read whole
DIFF_LINES = 200  # lines of one diff shown before it is cut
NAMES_SHOWN = 20  # pod names listed under a diff before "and N more"
VERDICT: dict[Any, str] = {
    0: "every pod is as declared",
    1: "something an apply cannot fix: a violation, an unreachable pod or an error",
    2: "an apply would change pods (drift, restarts), or another run is changing one",
}
STYLE = """
:root{--ok:#1a7f37;--drift:#9a6700;--restarted:#0969da;--busy:#8250df;--violation:#cf222e;
--unreachable:#a40e26;--error:#a40e26;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;
--card:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;
--bg:#0d1117;--card:#151b23;--ok:#3fb950;--drift:#d29922;--restarted:#4493f8;--busy:#ab7df8;
--violation:#f85149;--unreachable:#ff7b72;--error:#ff7b72}}
*{box-sizing:border-box}
body{margin:0;padding:1.5rem;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;
color:var(--fg);background:var(--bg)}
h1{font-size:1.4rem;margin:0 0 .25rem}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
.muted,small{color:var(--muted)}
.tiles{display:flex;flex-wrap:wrap;gap:.5rem;margin:1rem 0}
.tile{background:var(--card);border:1px solid var(--line);border-left:4px solid var(--muted);
border-radius:6px;padding:.4rem .8rem;min-width:7rem}
.tile b{display:block;font-size:1.3rem}
.zero{opacity:.55}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid var(--line);padding:.4rem .5rem;text-align:left;
vertical-align:top}
th{position:sticky;top:0;background:var(--card)}
td.pod{font-weight:600;overflow-wrap:anywhere;min-width:6rem}
ul{margin:0;padding-left:1.1rem}
.badge{display:inline-block;border-radius:1rem;padding:0 .55rem;color:#fff;font-weight:600;
background:var(--muted)}
.fix{font-weight:600}
code{font-size:.9em}
pre{background:var(--card);border:1px solid var(--line);padding:.5rem;overflow:auto;
white-space:pre-wrap;word-break:break-all}
details{margin:.3rem 0}summary{cursor:pointer}
.fit{color:var(--ok)}.unfit{color:var(--violation);font-weight:600}
"""
STYLE += "".join(
    f".s-{s}{{border-left-color:var(--{s})}}.badge.s-{s}{{background:var(--{s})}}" for s in STATUSES
)
# Nothing may be loaded or run: only the inline style above applies.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _text(value: Any) -> str:
    """Return ``value`` as HTML text that shows it literally: control characters made
    visible, then every character HTML gives a meaning to escaped (quotes too)."""
    return html.escape(visible(str(value)), quote=True)


def _pods(count: int) -> str:
    """Return ``count`` pods in words: ``1 pod``, ``3 pods``."""
    return f"{count} pod" if count == 1 else f"{count} pods"


def _names(pods: list[str]) -> str:
    """Return pod names as escaped text: up to ``NAMES_SHOWN``, then how many more."""
    shown = ", ".join(_text(name) for name in pods[:NAMES_SHOWN])
    more = len(pods) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _badge(status: str) -> str:
    """Return a pod's status as a badge in its status's colour."""
    return f'<span class="badge s-{_text(status)}">{_text(status)}</span>'


def _list(items: list[str]) -> str:
    """Return ``items`` (HTML already) as a list, or '' for none."""
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>" if items else ""


def _duration(seconds: float) -> str:
    """Return a span of time in words, to the minute past an hour: ``3 h 5 min``."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def with_fix(message: str) -> str:
    """Return a violation's message with what to do in bold: its last clause after ``; ``,
    where the roles write it ("...: the host is throttling; recreate the pod on another
    host"). The text is the message's, unchanged; one without ``; `` has an empty fix."""
    problem, _, fix = message.rpartition("; ") if "; " in message else (message, "", "")
    joiner = "; " if fix else ""
    return f'{_text(problem)}{joiner}<b class="fix">{_text(fix)}</b>'


def cost(pods: list[PodResult], what: str) -> tuple[str, str]:
    """Return what ``pods`` cost together per hour, and a caption that counts them (``what``
    they are: "in all", "idle now") and those of unknown price, which are never counted as 0:
    ``("$1.70/h", "3 pods in all, 1 of unknown price (not counted)")``."""
    known = [r.cost_per_hour for r in pods if r.cost_per_hour is not None]
    unknown = len(pods) - len(known)
    value = f"{usage.money(sum(known))}/h" if known or not pods else "price unknown"
    caption = f"{_pods(len(pods))} {what}"
    if unknown and known:
        caption += f", {unknown} of unknown price (not counted)"
    return value, caption


def use(result: PodResult) -> str:
    """Return whether the pod is in use, in words; for an idle pod since when (the watch's
    period where the check was given its state, else the one the pod keeps), for how long
    and what it cost since, where known; '' when the pod was not read."""
    found = result.activity
    if found is None:
        return ""
    if not found.get("idle"):
        return usage.use(result)
    since = result.idle_since or found.get("idle_since")
    parts = [f"idle since {since}" if since else "idle now"]
    if (found.get("idle_for") or 0) >= 60 and not result.idle_since:
        parts.append(f"for {_duration(found['idle_for'])}")
    if result.idle_since and result.cost_since is not None:
        parts.append(f"{usage.money(result.cost_since)} since")
    return ", ".join(parts)


def gpus(result: PodResult) -> str:
    """Return the pod's GPU fitness as HTML: unfit with its findings (``gpu.*`` violations),
    waived, fit, or not read; and what its GPUs read, where they were read."""
    unfit = sorted({v.get("id") or v["role"] for v in result.violations if _is_gpu(v)})
    waived = sorted({w["id"] for w in result.waived if _is_gpu(w)})
    if unfit:
        verdict = f'<span class="unfit">unfit: {_text(", ".join(unfit))}</span>'
    elif result.status not in CHECKED:
        return '<span class="muted">not read</span>'
    else:
        verdict = '<span class="fit">fit</span>'
    if waived:
        verdict += f" (waived: {_text(', '.join(waived))})"
    readings = (result.activity or {}).get("gpus")
    if readings is None:
        return verdict
    if not readings:
        return f"{verdict}<br><small>no GPU</small>"
    used = sorted(g["utilization"] for g in readings if g.get("utilization") is not None)
    load = ""
    if used:
        load = f", {used[0]} %" if used[0] == used[-1] else f", {used[0]}–{used[-1]} %"
    count = f"{len(readings)} GPU" + ("s" if len(readings) != 1 else "")
    return f"{verdict}<br><small>{_text(count + load)}</small>"


def _is_gpu(finding: dict[str, Any]) -> bool:
    """Return whether a violation or waived finding is about the GPUs (``gpu.*``)."""
    return str(finding.get("id") or "").startswith("gpu.")


def changes(result: PodResult, diff_ids: dict[str, int]) -> str:
    """Return, as HTML, what an apply would change on the pod (each change with a link to
    its diff, never a secret file's), or why the pod was not checked, and what the run did
    with its host key and the boot hook."""
    lines: list[str] = []
    if result.restarted:
        lines.append(_text(reports.restart_line(result)))
    if result.status == "busy":
        lines.append(_text(reports.busy_line(result)))
    if result.error:
        lines.append(_text(result.error))
    for change in result.changes:
        line = f"{_text(change['role'])} · {_text(change['operation'])}"
        shown = reports.shown_diff(change)
        if change.get("secret"):
            line += ' <small class="muted">(a secret file: its diff is never shown)</small>'
        elif shown:
            number = diff_ids[shown]
            line += f' <a href="#diff-{number}">diff {number}</a>'
        lines.append(line)
    if not lines and result.status == "ok":
        lines.append('<span class="muted">nothing would change</span>')
    notes = [reports.host_key_line(result.host_key), *reports.boot_lines(result.boot, quiet=True)]
    lines += [f"<small>{_text(note)}</small>" for note in notes if note]
    return _list(lines)


def violations(result: PodResult) -> str:
    """Return the pod's violations as HTML, each with its id and what to do; then its
    waived findings and stale waivers."""
    lines = [
        f"<code>{_text(v.get('id') or v['role'])}</code> {with_fix(v['message'])}"
        for v in result.violations
    ]
    lines += [
        f"<small>waived <code>{_text(w['id'])}</code> until {_text(w['until'])}, "
        f"{_text(w['reason'])}: {_text(w['message'])}</small>"
        for w in result.waived
    ]
    lines += [f"<small>stale {_text(note)}</small>" for note in result.stale_waivers]
    return _list(lines)


def _ordered(results: dict[str, PodResult]) -> list[tuple[str, PodResult]]:
    """Return the pods in the page's order: worst status first (one this version does not
    know, first of all), then by name."""

    def rank(item: tuple[str, PodResult]) -> tuple[int, str]:
        status = item[1].status
        return (-STATUSES.index(status) if status in STATUSES else -len(STATUSES), item[0])

    return sorted(results.items(), key=rank)


def _table(results: dict[str, PodResult], diff_ids: dict[str, int]) -> str:
    """Return the table of pods, one row each, in the page's order (``_ordered``)."""
    header = "".join(
        f"<th>{h}</th>"
        for h in ("pod", "status", "what would change", "violations", "$/h", "use", "GPUs")
    )
    rows = [
        f'<tr class="pod s-{_text(r.status)}"><td class="pod">{_text(name)}</td>'
        f"<td>{_badge(r.status)}</td><td>{changes(r, diff_ids)}</td>"
        f"<td>{violations(r)}</td><td>{_text(usage.price(r))}</td>"
        f"<td>{_text(use(r))}</td><td>{gpus(r)}</td></tr>"
        for name, r in _ordered(results)
    ]
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _diffs(results: dict[str, PodResult]) -> tuple[dict[str, int], str]:
    """Return each distinct diff's number (in the order the table links to them), and the
    section that shows each once (cut at ``DIFF_LINES``), folded, with the changes and pods
    it is for."""
    found: dict[str, dict[str, list[str]]] = {}
    for name, result in _ordered(results):
        for change in result.changes:
            shown = reports.shown_diff(change)
            if shown:
                where = f"{visible(change['role'])} · {visible(change['operation'])}"
                found.setdefault(shown, {}).setdefault(where, []).append(name)
    numbers = {diff: i for i, diff in enumerate(found, 1)}
    blocks = []
    for diff, number in numbers.items():
        lines = visible(diff).splitlines()
        cut = len(lines) - DIFF_LINES
        body = "\n".join(lines[:DIFF_LINES] + ([f"… {cut} more lines"] if cut > 0 else []))
        what = "; ".join(
            f"{_text(where)}: {_pods(len(pods))}: {_names(pods)}"
            for where, pods in found[diff].items()
        )
        blocks.append(
            f'<details id="diff-{number}"><summary>diff {number}: {what}</summary>'
            f"<pre>{_text(body)}</pre></details>"
        )
    section = f"<h2>Diffs</h2>{''.join(blocks)}" if blocks else ""
    return numbers, section


def _tiles(report: dict[str, Any], results: dict[str, PodResult]) -> str:
    """Return the totals: pods by status (statuses this version does not know too), what
    the fleet costs per hour, and what its idle pods cost."""
    summary = report.get("summary") or {}
    counts = {s: summary.get(s, 0) for s in STATUSES}
    for r in results.values():
        if r.status not in counts:
            counts[r.status] = sum(1 for o in results.values() if o.status == r.status)
    tiles = [
        f'<div class="tile s-{_text(s)}{" zero" if not n else ""}"><b>{_text(n)}</b>'
        f"{_text(s)}</div>"
        for s, n in counts.items()
    ]
    idle = [r for r in results.values() if r.idle is True]
    for value, caption in (cost(list(results.values()), "in all"), cost(idle, "idle now")):
        tiles.append(f'<div class="tile"><b>{_text(value)}</b>{_text(caption)}</div>')
    return f'<div class="tiles">{"".join(tiles)}</div>'


def render(report: dict[str, Any]) -> str:
    """Return the page of a check's JSON report (as ``result.to_json`` makes it, or as read
    back from a file): a whole HTML document, self-contained, that runs no script and loads
    nothing. ``podstate watch`` serves the latest one at ``/`` of its metrics port."""
    results = from_json(report)
    summary = report.get("summary") or {}
    code = summary.get("exit_code")
    worst = [f"{summary[s]} {s}" for s in STATUSES[1:] if summary.get(s)]
    title = (
        f"podstate check: {', '.join(worst) or 'no drift'} "
        f"({_pods(summary.get('pods', len(results)))}, exit {code})"
    )
    shard, checked = report.get("shard"), report.get("checked_at")
    where = f"shard {shard['index']} of {shard['count']}; " if shard else ""
    when = f"checked {checked.replace('T', ' ').removesuffix('Z')} UTC; " if checked else ""
    keys = reports.host_key_summary(results)
    numbers, diffs = _diffs(results)
    body = [
        f"<h1>{_text(title)}</h1>",
        f'<p class="muted">{_text(when + where)}exit {_text(code)}: {_text(VERDICT.get(code, "?"))}'
        f"{'; ' + _text(keys) if keys else ''}</p>",
        _tiles(report, results),
        "<h2>Pods</h2>",
        _table(results, numbers) if results else '<p class="muted">no pod</p>',
        diffs,
        f'<p class="muted"><small>podstate check report, format '
        f"{_text(report.get('format_version', '?'))}; the JSON report (--json) holds every "
        "reading behind this page.</small></p>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_text(title)}</title><style>{STYLE}</style></head>\n<body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
