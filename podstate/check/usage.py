"""What each pod costs and whether it is in use, in words, for the terminal and Markdown
reports: one line per pod and the fleet's total, from ``podstate.check.result`` only.

An unknown price or reading is said to be unknown, never shown as 0.
"""

from __future__ import annotations

from podstate.check.result import PodResult, fleet_cost


def money(usd: float) -> str:
    """Return ``usd`` as dollars and cents (``$0.69``); sums under a cent keep a digit more."""
    return f"${usd:.3f}" if 0 < usd < 0.01 else f"${usd:.2f}"


def price(result: PodResult) -> str:
    """Return the pod's price per hour in words: ``$0.69/h``, or ``price unknown``."""
    if result.cost_per_hour is None:
        return "price unknown"
    return f"{money(result.cost_per_hour)}/h"


def use(result: PodResult) -> str:
    """Return whether the pod is in use, in words: ``idle now``, ``in use: GPU 0 at 87 %``,
    or ``idle unknown (unread: ...)`` (what could not be read); '' when the pod was not probed."""
    found = result.activity
    if found is None:
        return ""
    if found["idle"] and result.idle_since:  # the watch's period (check --watch-state)
        spent = "an unknown sum" if result.cost_since is None else money(result.cost_since)
        return f"idle since {result.idle_since}, {spent} since"
    if found["idle"]:
        return "idle now"
    if found["idle"] is False:
        return "in use: " + ", ".join(found["in_use"][:3])
    return "idle unknown (unread: " + "; ".join(found["unknown"][:3]) + ")"


def pod_line(result: PodResult) -> str:
    """Return the line that says what the pod costs per hour and whether it is in use."""
    return ", ".join(part for part in (price(result), use(result)) if part)


def fleet_line(results: dict[str, PodResult]) -> str:
    """Return the fleet's price per hour in words: ``$3.52/h in all``, or how many pods'
    prices are unknown, with what the others cost together."""
    total, unknown = fleet_cost(results)
    if total is not None:
        return f"{money(total)}/h in all"
    known = sum(r.cost_per_hour or 0.0 for r in results.values())
    others = len(results) - unknown
    if not others:
        return "price unknown"
    return f"{money(known)}/h for {others} pod(s), {unknown} pod(s) of unknown price"
