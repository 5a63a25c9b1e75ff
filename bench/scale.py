"""Scale: converge and check N sandbox pods from one control process, with its peak memory.

Run with ``make bench-scale`` (root). Writes bench/results/scale.md and scale.json: for each
pod count, the wall time and peak resident memory of ``pyinfra -y inventories/pods.py
deploy/pod.py`` (first apply, then a no-op apply) and of ``podstate check``, each per pod,
plus the least-squares slope of peak memory per pod; and for the largest count, the check
split into ``--shards`` shards (``podstate check --shard K/N``), each timed alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.stats import slope
from podstate.sandbox import lifecycle

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RESULTS = ROOT / "bench" / "results"


def measure(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run ``command``; return its exit code, wall seconds and peak RSS in MiB (wait4).

    Its stderr goes to a temporary file, not a pipe: at 500 pods pyinfra writes more log
    lines than a pipe holds, and a pipe read only after ``wait4`` would block it forever.
    """
    started = time.monotonic()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - started
        log.seek(0)
        stderr = log.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0,):
        tail = "\n".join(stderr.splitlines()[-5:])
        print(f"  {' '.join(command[:2])} exited {code}:\n{tail}", file=sys.stderr)
    return {"exit": code, "seconds": seconds, "peak_mib": usage.ru_maxrss / 1024}


def run_count(
    pods: int, work: Path, shards: int = 4, base_port: int | None = None
) -> dict[str, dict[str, float]]:
    """Bring up ``pods`` sandbox pods, measure apply, no-op apply and check, then each of
    ``shards`` shards' check (``--shard K/N``) alone, one after the other; take them down."""
    os.environ["PODSTATE_SANDBOX"] = str(work / f"sandbox-{pods}")
    vars_dir = work / f"vars-{pods}"
    (vars_dir / "host_vars").mkdir(parents=True)
    (vars_dir / "group_vars").mkdir()
    (vars_dir / "group_vars" / "all.yaml").write_text(
        (ROOT / "inventories/group_vars/all.yaml").read_text()
    )
    # the one 64 MiB /dev/shm pod would be a violation: accept it, so every pod must succeed
    (vars_dir / "host_vars" / "pod-3.yaml").write_text(yaml.safe_dump({"shm": {"min_size": "32M"}}))
    try:
        pods_file = lifecycle.up(pods=pods, base_port=base_port)
        env = {**os.environ, "PODSTATE_PODS": str(pods_file), "PODSTATE_VARS": str(vars_dir)}
        apply = [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"]
        check = [str(BIN / "podstate"), "check", "--deploy", "deploy/pod.py"]
        runs = {
            "first apply": measure(apply, env),
            "noop apply": measure(apply, env),
            "check": measure(check, env),
        }
        for k in range(1, shards + 1) if shards > 1 else ():
            runs[f"check --shard {k}/{shards}"] = measure([*check, "--shard", f"{k}/{shards}"], env)
        return runs
    finally:
        lifecycle.down()


def _is_shard(run: str) -> bool:
    return "--shard" in run


def report(results: dict[int, dict[str, dict[str, float]]]) -> str:
    """Return the markdown report: every figure with its cost per pod, the memory slope per
    pod of each whole-fleet run, and each count's shards beside its whole check."""
    counts = sorted(results)
    lines = [
        "# Scale: one control process, many pods",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}. Sandbox pods share the control machine's cores.",
        f"Measured {time.strftime('%Y-%m-%d')} with `make bench-scale`; no added latency.",
        "",
        "| pods | run | exit | wall s | ms per pod | peak RSS MiB |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for pods in counts:
        for run, m in results[pods].items():
            if _is_shard(run):
                continue
            lines.append(
                f"| {pods} | {run} | {m['exit']} | {m['seconds']:.1f} "
                f"| {m['seconds'] * 1000 / pods:.0f} | {m['peak_mib']:.0f} |"
            )
    lines += ["", "Peak memory per extra pod (least-squares slope):", ""]
    whole = [run for run in results[counts[0]] if not _is_shard(run)]
    for run in whole:
        points = [(p, results[p][run]["peak_mib"]) for p in counts if run in results[p]]
        lines.append(
            f"- {run}: {slope(points) * 1024:.0f} KiB per pod"
            if len(points) > 1
            else f"- {run}: (one pod count)"
        )
    for pods in counts:
        shard_runs = {run: m for run, m in results[pods].items() if _is_shard(run)}
        if not shard_runs:
            continue
        full = results[pods]["check"]
        n = len(shard_runs)
        lines += [
            "",
            f"{pods} pods checked as {n} shards (`podstate check --shard K/{n}`), each "
            "timed alone, one after the other, as N CI runners would run them at once:",
            "",
            "| run | exit | wall s | of the whole check | peak RSS MiB |",
            "|---|---:|---:|---:|---:|",
            f"| whole fleet | {full['exit']} | {full['seconds']:.1f} | 1.00 "
            f"| {full['peak_mib']:.0f} |",
        ]
        for run, m in shard_runs.items():
            lines.append(
                f"| {run.removeprefix('check ')} | {m['exit']} | {m['seconds']:.1f} "
                f"| {m['seconds'] / full['seconds']:.2f} | {m['peak_mib']:.0f} |"
            )
        slowest = max(m["seconds"] for m in shard_runs.values())
        lines += [
            "",
            f"The slowest shard took {slowest / full['seconds']:.2f} of the whole check's "
            f"time (1/{n} = {1 / n:.2f} would be perfect).",
        ]
    ok = all(m["exit"] == 0 for r in results.values() for m in r.values())
    lines += ["", f"All runs succeeded on every pod: {'yes' if ok else 'NO'}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, nargs="+", default=[50, 100, 200, 500])
    parser.add_argument(
        "--shards", type=int, default=4, help="check the largest count as N shards (1: none)"
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=10000,
        help="first sandbox port: below the range other sandboxes default to, since 500 pods "
        "span more ports than lie between two of their bases",
    )
    parser.add_argument(
        "--report", action="store_true", help="rebuild scale.md from scale.json only"
    )
    args = parser.parse_args()
    if args.report:
        saved = json.loads((RESULTS / "scale.json").read_text())
        text = report({int(pods): runs for pods, runs in saved.items()})
        (RESULTS / "scale.md").write_text(text)
        print(text)
        return 0
    results = {}
    with tempfile.TemporaryDirectory(prefix="podstate-scale-") as work:
        for pods in args.pods:
            print(f"scale: {pods} pods", file=sys.stderr)
            shards = args.shards if pods == max(args.pods) else 1
            results[pods] = run_count(pods, Path(work), shards, args.base_port)
            RESULTS.mkdir(parents=True, exist_ok=True)  # each count kept as soon as it is done
            (RESULTS / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
            (RESULTS / "scale.md").write_text(report(results))
    print(report(results))
    return 0 if all(m["exit"] == 0 for r in results.values() for m in r.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
