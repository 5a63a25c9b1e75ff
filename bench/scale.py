"""Scale: converge and check N sandbox pods from one control process, with its peak memory.

Run with ``make bench-scale`` (root). Writes bench/results/scale.md and scale.json: for each
pod count, the wall time and peak resident memory of ``pyinfra -y inventories/pods.py
deploy/pod.py`` (first apply, then a no-op apply) and of ``podstate check``, plus the
least-squares slope of peak memory per pod.
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
from podstate import sandbox

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RESULTS = ROOT / "bench" / "results"


def measure(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run ``command``; return its exit code, wall seconds and peak RSS in MiB (wait4)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0,):
        tail = "\n".join(stderr.splitlines()[-5:])
        print(f"  {' '.join(command[:2])} exited {code}:\n{tail}", file=sys.stderr)
    return {"exit": code, "seconds": time.monotonic() - started, "peak_mib": usage.ru_maxrss / 1024}


def run_count(pods: int, work: Path) -> dict[str, dict[str, float]]:
    """Bring up ``pods`` sandbox pods, measure apply, no-op apply and check; take them down."""
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
        pods_file = sandbox.up(pods=pods)
        env = {**os.environ, "PODSTATE_PODS": str(pods_file), "PODSTATE_VARS": str(vars_dir)}
        apply = [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"]
        return {
            "first apply": measure(apply, env),
            "noop apply": measure(apply, env),
            "check": measure([str(BIN / "podstate"), "check"], env),
        }
    finally:
        sandbox.down()


def report(results: dict[int, dict[str, dict[str, float]]]) -> str:
    """Return the markdown table of every figure, with the memory slope per pod."""
    counts = sorted(results)
    lines = [
        "# Scale: one control process, many pods",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}. Sandbox pods share the control machine's cores.",
        f"Measured {time.strftime('%Y-%m-%d')} with `make bench-scale`; no added latency.",
        "",
        "| pods | run | exit | wall s | peak RSS MiB |",
        "|---:|---|---:|---:|---:|",
    ]
    for pods in counts:
        for run, m in results[pods].items():
            lines.append(
                f"| {pods} | {run} | {m['exit']} | {m['seconds']:.1f} | {m['peak_mib']:.0f} |"
            )
    lines += ["", "Peak memory per extra pod (least-squares slope):", ""]
    for run in results[counts[0]]:
        points = [(p, results[p][run]["peak_mib"]) for p in counts]
        lines.append(
            f"- {run}: {slope(points) * 1024:.0f} KiB per pod"
            if len(points) > 1
            else f"- {run}: (one pod count)"
        )
    ok = all(m["exit"] == 0 for r in results.values() for m in r.values())
    lines += ["", f"All runs succeeded on every pod: {'yes' if ok else 'NO'}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, nargs="+", default=[25, 50, 100, 200])
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="podstate-scale-") as work:
        for pods in args.pods:
            print(f"scale: {pods} pods", file=sys.stderr)
            results[pods] = run_count(pods, Path(work))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "scale.md").write_text(report(results))
    print(report(results))
    return 0 if all(m["exit"] == 0 for r in results.values() for m in r.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
