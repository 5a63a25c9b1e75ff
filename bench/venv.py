"""Venv benchmark: time to a ready venv of numpy + pandas on sandbox pods, four ways.

On fresh sandbox pods whose network volume (/workspace, sshfs) is reached through the
latency proxy (bench/latency_proxy.py, default 10 ms round trip), with the same local
wheelhouse (numpy 2.1.3, pandas 2.2.3 and their dependencies, cp311 manylinux x86_64,
fetched once with ``pip download``) copied onto each pod's local disk:

1. ``naive``: ``python3 -m venv /workspace/venv`` and ``pip install`` there, with the
   pod's own environment (RunPod's ``PIP_CACHE_DIR=/workspace/.cache/pip``, default
   TMPDIR), on an sshfs pod; capped by ``--naive-timeout``;
2. ``role``: ``pyinfra`` applying a ``venv:`` section to a fresh pod (no uv, empty caches);
3. ``restore``: the same after wiping the pod's container disk, with ``venv.snapshot`` on
   the network volume: the role unpacks the snapshot instead of installing;
4. ``floor``: ``uv pip install`` by hand into local disk with a warm local cache.

For 2 and 3 the table gives the whole ``pyinfra`` run (connect, probe, uv upload, build)
and the venv operation alone (from its log's timestamps). Then ``import pandas`` is timed
from each venv, first (cold: uv does not precompile bytecode) and again (warm).

Run as root: ``make bench-venv`` or ``python -m bench.venv [--rtt-ms 10]``. Writes
bench/results/venv.md and venv.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench import latency_proxy
from podstate import sandbox

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RESULTS = ROOT / "bench" / "results"
WHEELS = Path.home() / ".cache" / "podstate" / "bench-wheels"
PACKAGES = ["numpy==2.1.3", "pandas==2.2.3"]
DOWNLOAD = [
    "--only-binary",
    ":all:",
    "--platform",
    "manylinux2014_x86_64",
    "--platform",
    "manylinux_2_17_x86_64",
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
]
NAIVE_POD, ROLE_POD = "pod-1", "pod-5"  # both have /workspace on sshfs
IMPORT = (
    "import time; t = time.perf_counter(); import pandas; print(round(time.perf_counter() - t, 3))"
)


def wheelhouse(directory: Path) -> Path:
    """Return a directory holding the benchmark's wheels, downloading them the first time."""
    if not list(directory.glob("pandas-*.whl")):
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [str(BIN / "python"), "-m", "pip", "download", "-q", *DOWNLOAD, "-d", str(directory)]
            + PACKAGES,
            check=True,
        )
    return directory


class Pods:
    """The sandbox pods, reached by ssh and pyinfra as a user would."""

    def __init__(self, state: Path, vars_dir: Path) -> None:
        self.state, self.vars_dir = state, vars_dir

    def out(self, pod: str, command: str, timeout: float = 600) -> str:
        result = sandbox.ssh(pod, command, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{pod}: {command}: {result.stderr.strip()[-500:]}")
        return result.stdout

    def apply(self, pod: str) -> float:
        """Apply deploy/pod.py to ``pod``; return its wall time in seconds."""
        env = {
            **os.environ,
            "PODSTATE_PODS": str(self.state / "pods.yaml"),
            "PODSTATE_VARS": str(self.vars_dir),
            "PODSTATE_SANDBOX": str(self.state),
        }
        start = time.perf_counter()
        run = subprocess.run(
            [str(BIN / "pyinfra"), "-y", "--limit", pod, "inventories/pods.py", "deploy/pod.py"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - start
        if run.returncode != 0:
            raise RuntimeError(f"apply to {pod} failed: {run.stderr.strip()[-800:]}")
        return took

    def want(self, pod: str, venv: dict[str, Any] | None) -> None:
        path = self.vars_dir / "host_vars" / f"{pod}.yaml"
        path.write_text(yaml.safe_dump({"venv": venv} if venv else {}))

    def operation_seconds(self, pod: str) -> float:
        """Return how long the last venv operation took, from its log's timestamps."""
        log = self.out(pod, "cat /opt/.podstate/venv.log")
        marks = [float(m) for m in re.findall(r"(?:started|done) at ([0-9.]+)", log)]
        return marks[-1] - marks[0]

    def import_seconds(self, pod: str, python: str) -> tuple[float, float]:
        """Return (first, second) times of ``import pandas`` from an interpreter on ``pod``."""
        command = f"{python} -c {shlex.quote(IMPORT)}"
        return float(self.out(pod, command).split()[-1]), float(self.out(pod, command).split()[-1])


def run(rtt_ms: float, naive_timeout: int, wheels: Path, repeat: int) -> dict[str, Any]:
    """Run the four cases (2 to 4 ``repeat`` times, for medians); return the raw results."""
    results: dict[str, Any] = {
        "rtt_ms": rtt_ms,
        "naive_timeout_s": naive_timeout,
        "repeat": repeat,
    }
    with (
        latency_proxy.routes(rtt_ms) as route,
        tempfile.TemporaryDirectory(prefix="podstate-bench-venv-") as tmp,
    ):
        state, vars_dir = Path(tmp) / "sandbox", Path(tmp) / "vars"
        (vars_dir / "group_vars").mkdir(parents=True)
        (vars_dir / "host_vars").mkdir()
        (vars_dir / "group_vars" / "all.yaml").write_text(
            yaml.safe_dump(
                {
                    "scratch": {"/scratch": {"size": "8G"}},
                    "dirs": {
                        "TMPDIR": "/scratch/tmp",
                        "PIP_CACHE_DIR": "/scratch/pip",
                        "UV_CACHE_DIR": "/scratch/uv",
                    },
                }
            )
        )
        os.environ["PODSTATE_SANDBOX"] = str(state)
        try:
            sandbox.up(pods=5, disk="6G", storage_route=route)
            pods = Pods(state, vars_dir)
            tar = subprocess.run(["tar", "-C", str(wheels), "-cf", "-", "."], capture_output=True)
            for pod in (NAIVE_POD, ROLE_POD):
                result = sandbox.ssh(
                    pod, "mkdir -p /opt/wheelhouse && tar -xf - -C /opt/wheelhouse", tar.stdout
                )
                assert result.returncode == 0, result.stderr
            files = pods.out(ROLE_POD, "cd /opt/wheelhouse && ls").split()
            results["wheels"] = files
            pods.apply(ROLE_POD)  # scratch and dirs first: case 2 times the venv alone

            venv = {
                "path": "/opt/venv",
                "packages": PACKAGES,
                "find_links": ["/opt/wheelhouse"],
                "no_index": True,
            }
            wipe = "rm -rf /opt/venv /opt/.venv-* /opt/.podstate /scratch/uv /scratch/pip"
            role, restore, pack = [], [], []
            for _ in range(repeat):  # each time from an empty container disk and volume
                pods.out(ROLE_POD, f"{wipe} /workspace/.podstate")
                pods.want(ROLE_POD, venv)
                role.append((pods.apply(ROLE_POD), pods.operation_seconds(ROLE_POD)))
                pods.want(ROLE_POD, {**venv, "snapshot": "/workspace/.podstate/venv"})
                pack.append(pods.apply(ROLE_POD))
                pods.out(ROLE_POD, wipe)
                restore.append((pods.apply(ROLE_POD), pods.operation_seconds(ROLE_POD)))
                print(f"role {role[-1]}, restore {restore[-1]}", file=sys.stderr)
            results["role"] = _median(role)
            results["restore"] = _median(restore)
            results["snapshot_pack_s"] = statistics.median(pack)
            results["snapshot_bytes"] = int(
                pods.out(ROLE_POD, "cat /workspace/.podstate/venv/venv-*.tar.* | wc -c")
            )
            results["files"] = int(pods.out(ROLE_POD, "find -L /opt/venv -type f | wc -l"))
            # Imports from the restored venv, then from a freshly built one.
            results["restore"]["import_s"] = pods.import_seconds(ROLE_POD, "/opt/venv/bin/python")
            pods.out(ROLE_POD, f"{wipe} /workspace/.podstate")
            pods.want(ROLE_POD, venv)
            pods.apply(ROLE_POD)
            results["role"]["import_s"] = pods.import_seconds(ROLE_POD, "/opt/venv/bin/python")
            noop = [pods.apply(ROLE_POD) for _ in range(repeat)]
            results["noop"] = {"run_s": statistics.median(noop), "runs_s": noop}

            results["floor"] = floor(pods, repeat)
            results["load"] = f"{os.getloadavg()[0]:.1f}"
            print(f"floor: {results['floor']}", file=sys.stderr)
            if naive_timeout:
                results["naive"] = naive(pods, naive_timeout)
                print(f"naive: {results['naive']}", file=sys.stderr)
        finally:
            sandbox.down()
    return results


def floor(pods: Pods, repeat: int) -> dict[str, Any]:
    """Time ``uv pip install`` by hand into local disk, with a cache it has filled before.

    Also with an empty cache (``cold_s``), as on a fresh pod: what the role's build pays.
    """
    from uv import find_uv_bin

    with open(find_uv_bin(), "rb") as binary:
        sandbox.ssh(
            ROLE_POD, "cat > /usr/local/bin/uv && chmod 755 /usr/local/bin/uv", binary.read()
        )
    install = (
        "export UV_NO_CONFIG=1 UV_CACHE_DIR={1}; "
        "uv venv -q --python /usr/bin/python3 {0} && "
        "uv pip install -q --python {0}/bin/python --find-links /opt/wheelhouse --no-index "
        + " ".join(PACKAGES)
    )
    warm, cold = "/scratch/floor-cache", "/scratch/floor-cold-cache"
    pods.out(ROLE_POD, install.format("/opt/floor-warmup", warm))
    times, cold_times = [], []
    for _ in range(repeat):
        pods.out(ROLE_POD, f"rm -rf /opt/floor {cold}")
        start = time.perf_counter()
        pods.out(ROLE_POD, install.format("/opt/floor-cold", cold))
        cold_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        pods.out(ROLE_POD, install.format("/opt/floor", warm))
        times.append(time.perf_counter() - start)
        pods.out(ROLE_POD, "rm -rf /opt/floor-cold")
    return {
        "run_s": statistics.median(times),
        "runs_s": times,
        "cold_s": statistics.median(cold_times),
        "cold_runs_s": cold_times,
        "import_s": pods.import_seconds(ROLE_POD, "/opt/floor/bin/python"),
    }


def _median(runs: list[tuple[float, float]]) -> dict[str, Any]:
    """Return the medians of (whole run, operation) pairs, with the runs themselves."""
    return {
        "run_s": statistics.median(r for r, _ in runs),
        "operation_s": statistics.median(o for _, o in runs),
        "runs_s": runs,
    }


def naive(pods: Pods, timeout: int) -> dict[str, Any]:
    """Time venv + pip install on the network volume with the pod's own environment.

    ``--copies``: the sandbox's sshfs volume cannot read back absolute symlinks.
    """
    command = (
        ". /etc/rp_environment; export PIP_CONFIG_FILE=/dev/null; "
        f"timeout {timeout} sh -c 'python3 -m venv --copies /workspace/venv && "
        "/workspace/venv/bin/pip install -q --find-links /opt/wheelhouse --no-index "
        + " ".join(PACKAGES)
        + "'"
    )
    start = time.perf_counter()
    result = sandbox.ssh(NAIVE_POD, command, timeout=timeout + 120)
    took = time.perf_counter() - start
    if result.returncode == 124:
        return {"run_s": took, "timed_out": True, "import_s": None}
    if result.returncode != 0:
        raise RuntimeError(f"naive install failed: {result.stderr.strip()[-800:]}")
    return {
        "run_s": took,
        "timed_out": False,
        "import_s": pods.import_seconds(NAIVE_POD, "/workspace/venv/bin/python"),
    }


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"


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
        ("4. floor: uv pip install by hand, warm local cache", _s(fl["run_s"]), "", imports(fl)),
        ("uv pip install by hand, empty cache (as on a fresh pod)", _s(fl["cold_s"]), "", ("", "")),
        ("pyinfra apply that changes nothing (same pod)", _s(noop["run_s"]), "", ("", "")),
    ]
    r12 = naive_s / role["run_s"]
    r24 = role["run_s"] / fl["run_s"]
    r24_op = role["operation_s"] / fl["run_s"]
    r34 = restore["run_s"] / fl["run_s"]
    r34_op = restore["operation_s"] / fl["run_s"]
    r_noop = noop["run_s"] / fl["run_s"]
    r2_cold = role["run_s"] / fl["cold_s"]
    lines = [
        "# Venv benchmark: time to a ready venv",
        "",
        f"numpy 2.1.3 + pandas 2.2.3 and their dependencies ({len(results['wheels'])} wheels, "
        f"{results['files']} files in the venv) from a wheelhouse on the pod's local disk; "
        f"network volume (sshfs) behind a {results['rtt_ms']:g} ms round-trip link; cases 2 to 4 "
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
        "Whole run: the wall time of the `pyinfra` apply (connect, probe, upload uv, build,",
        "switch) or of the one `ssh` command; venv operation: the build or restore command",
        "alone, from its log. The snapshot (packed once after a build, "
        f"{results['snapshot_bytes'] / 2**20:.0f} MiB) took {_s(results['snapshot_pack_s'])} "
        "for the whole apply that wrote it (median).",
        "",
        "| ratio | value | target | met |",
        "|---|---|---|---|",
        f"| 1 / 2 (naive / role) | {bound}{r12:.0f}x | >= 100x | "
        f"{'yes' if r12 >= 100 else 'no' + (' (lower bound)' if bound else '')} |",
        f"| 2 / 4 (role / floor), whole run | {r24:.1f}x | <= 1.5x | "
        f"{'yes' if r24 <= 1.5 else 'no'} |",
        f"| 2 / 4, venv operation alone | {r24_op:.1f}x | <= 1.5x | "
        f"{'yes' if r24_op <= 1.5 else 'no'} |",
        f"| 3 / 4 (restore / floor), whole run | {r34:.1f}x | | |",
        f"| 3 / 4, venv operation alone | {r34_op:.1f}x | | |",
        f"| no-op apply / 4 (what any pyinfra run costs) | {r_noop:.1f}x | | |",
        f"| 2 / uv by hand with an empty cache, whole run | {r2_cold:.1f}x | | |",
        f"| 2 / same, venv operation alone | {role['operation_s'] / fl['cold_s']:.1f}x | | |",
        "",
        "The first import from the uv-built venvs (2, 3, 4) compiles bytecode, since uv does",
        "not precompile; pip (1) compiles at install time. The role's whole run includes",
        "uploading the control machine's uv binary (gzipped, about 17 MB) to a pod that has",
        "none, a cold uv cache, and pyinfra's own start-up, connection and probe; the floor has",
        "uv and a warm cache already. Here the wheels are on the pod's own disk, so a build",
        "downloads nothing and beats reading the snapshot over the volume link; a snapshot",
        "pays off when a build has to download its packages or build sdists. The sandbox",
        "shares a 2-core machine with whatever else runs on it, so single runs vary.",
        "",
        f"The 2 / 4 target of 1.5x allows {_s(1.5 * fl['run_s'])}: less than a pyinfra apply "
        f"that changes nothing ({_s(noop['run_s'])}), so no run that starts pyinfra can meet "
        "it against this floor. The venv operation's own gap to the floor is the empty cache "
        "of a fresh pod: against uv run by hand with an empty cache, it is the last ratio.",
    ]
    if results.get("load"):
        lines += [
            "",
            f"Load average of the machine (1 min) around cases 2 to 4: {results['load']}.",
        ]
    if results.get("note"):
        lines += ["", results["note"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write bench/results/venv.md; returns the exit status."""
    parser = argparse.ArgumentParser(prog="bench.venv", description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=10.0, help="network volume round trip")
    parser.add_argument("--naive-timeout", type=int, default=1200, help="cap on case 1, in seconds")
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="wheelhouse directory")
    parser.add_argument("--repeat", type=int, default=3, help="runs of cases 2-4 (medians)")
    parser.add_argument("--report", action="store_true", help="rewrite the report from JSON")
    parser.add_argument(
        "--reuse-naive",
        action="store_true",
        help="keep case 1 (about 20 minutes) from the last JSON and rerun cases 2-4 only",
    )
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw = RESULTS / "venv.json"
    if args.report:
        results = json.loads(raw.read_text())
    else:
        if os.geteuid() != 0:
            print("bench.venv: sandbox pods need root", file=sys.stderr)
            return 2
        previous = json.loads(raw.read_text()) if args.reuse_naive and raw.exists() else {}
        timeout = 0 if "naive" in previous else args.naive_timeout
        results = run(args.rtt_ms, timeout, wheelhouse(args.wheels), args.repeat)
        if "naive" in previous:
            results["naive"] = previous["naive"]
            results["naive_date"] = previous.get("naive_date") or previous.get("date")
        results["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs"
        results["date"] = time.strftime("%Y-%m-%d")
        raw.write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "venv.md").write_text(report(results))
    print((RESULTS / "venv.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
