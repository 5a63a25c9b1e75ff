"""The venv benchmark's Markdown report, from the raw JSON alone."""

from __future__ import annotations

from typing import Any


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"


def _met(value: float, limit: float, at_most: bool = True) -> str:
    return "yes" if (value <= limit if at_most else value >= limit) else "no"


def report(results: dict[str, Any]) -> str:
    """Return the Markdown report of a run."""
    naive_r, role, restore, fl, noop = (
        results[k] for k in ("naive", "role", "restore", "floor", "noop")
    )
    naive_s = naive_r["run_s"]
    naive_text = f"> {naive_s:.0f} s (timed out)" if naive_r["timed_out"] else _s(naive_s)
    bound = "at least " if naive_r["timed_out"] else ""

    def imports(case: dict[str, Any]) -> tuple[str, str]:
        first_second = case.get("import_s")
        return (_s(first_second[0]), _s(first_second[1])) if first_second else ("n/a", "n/a")

    rows = [
        ("1. naive: pip into a venv on the network volume", naive_text, "", imports(naive_r)),
        (
            "2. podstate venv role, fresh pod",
            _s(role["run_s"]),
            _s(role["operation_s"]),
            imports(role),
        ),
        (
            "3. podstate venv role, restore from snapshot",
            _s(restore["run_s"]),
            _s(restore["operation_s"]),
            imports(restore),
        ),
        ("4. uv pip install by hand, warm local cache", _s(fl["run_s"]), "", imports(fl)),
        ("uv pip install by hand, empty cache (as on a fresh pod)", _s(fl["cold_s"]), "", ("", "")),
        (
            "unpacking the snapshot archive by hand from the volume",
            _s(fl["unpack_s"]),
            "",
            ("", ""),
        ),
        ("pyinfra apply that changes nothing (same pod)", _s(noop["run_s"]), "", ("", "")),
    ]
    remote = results.get("remote")
    if remote:
        rows += [
            ("5a. remote index: role builds, fresh pod", _s(remote["build"]["run_s"]),
             _s(remote["build"]["operation_s"]), ("", "")),
            ("5b. remote index: role restores from snapshot", _s(remote["restore"]["run_s"]),
             _s(remote["restore"]["operation_s"]), ("", "")),
        ]  # fmt: skip
    r12 = naive_s / role["run_s"]
    fresh_floor = noop["run_s"] + fl["cold_s"]
    restore_floor = noop["run_s"] + fl["unpack_s"]
    r_fresh = role["run_s"] / fresh_floor
    r_restore = restore["run_s"] / restore_floor
    lines = [
        "# Venv benchmark: time to a ready venv",
        "",
        f"numpy 2.1.3 + pandas 2.2.3 and their dependencies ({len(results['wheels'])} wheels, "
        f"{results['files']} files in the venv, pip included, bytecode compiled) from a "
        "wheelhouse on the pod's local disk; "
        f"network volume (sshfs) behind a {results['rtt_ms']:g} ms round-trip link; cases 2 to 5 "
        f"are medians of {results['repeat']} runs, each from an empty container disk. "
        f"Machine: {results['machine']}. Run {results['date']} with `make bench-venv`"
        + (
            f" (case 1 from the run of {results['naive_date']}, kept with `--reuse-naive`)."
            if results.get("naive_date")
            else "."
        ),
        "",
        "| case | whole run | venv operation | first `import pandas` | again |",
        "|---|---|---|---|---|",
    ]
    for name, total, operation, (first, again) in rows:
        lines.append(f"| {name} | {total} | {operation} | {first} | {again} |")
    lines += [
        "",
        "Whole run: the wall time of the `pyinfra` apply (connect, probe, upload uv, build or",
        "restore, verify, switch) or of the one `ssh` command; venv operation: the build or",
        "restore command alone, from its log. The by-hand install does what the role does:",
        "`uv venv`, then `uv pip install --compile-bytecode` of the packages and the",
        "interpreter's own pip wheel. The snapshot (packed once after a build, "
        f"{results['snapshot_bytes'] / 2**20:.0f} MiB) took {_s(results['snapshot_pack_s'])} "
        "for the whole apply that wrote it (median).",
        "",
        "| ratio | value | target | met |",
        "|---|---|---|---|",
        f"| 1 / 2 (naive / role) | {bound}{r12:.0f}x | >= 100x | "
        f"{_met(r12, 100, at_most=False)}{' (lower bound)' if bound and r12 < 100 else ''} |",
        f"| 2 / (no-op apply + uv by hand, empty cache) | {r_fresh:.2f}x | <= 1.3x | "
        f"{_met(r_fresh, 1.3)} |",
        f"| 3 / (no-op apply + unpacking by hand) | {r_restore:.2f}x | <= 1.3x | "
        f"{_met(r_restore, 1.3)} |",
        f"| 2 / 4 (role / uv by hand, warm cache), for reference | "
        f"{role['run_s'] / fl['run_s']:.1f}x | | |",
    ]
    if remote:
        ratio = remote["build"]["run_s"] / remote["restore"]["run_s"]
        lines += [
            f"| 5a / 5b (remote build / restore) | {ratio:.1f}x | | |",
            "",
            f"Case 5: the same wheels served over HTTP (`find_links`) through the latency proxy "
            f"at {remote['rtt_ms']:g} ms round trip and {remote['mbs']:g} MB/s each way, "
            "roughly a far-away PyPI mirror; the snapshot is read over the volume link of "
            "case 3.",
        ]
    lines += [
        "",
        "The sandbox shares a 2-core machine with whatever else runs on it, so single runs",
        "vary.",
    ]
    if results.get("load"):
        lines += [
            "",
            f"Load average of the machine (1 min) around cases 2 to 5: {results['load']}.",
        ]
    if results.get("note"):
        lines += ["", results["note"]]
    return "\n".join(lines) + "\n"
