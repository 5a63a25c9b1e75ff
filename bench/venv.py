"""Venv benchmark: time to a ready venv of numpy + pandas on sandbox pods, several ways.

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
4. ``floor``: ``uv pip install`` by hand into local disk with a warm local cache, and
   with an empty one (``cold_s``), doing what the role does (pip seeded from the
   interpreter's wheel, bytecode compiled); and unpacking the snapshot archive by hand
   from the volume (``unpack_s``);
5. ``remote``: packages from a remote index instead: the same wheels served over HTTP
   (find-links) through the latency proxy at ``--index-rtt-ms`` (50) and ``--index-mbs``
   (50 MB/s); a build on a wiped pod against a restore from the snapshot.

The targets are ratios to floors measured in the same run: a fresh pod's whole apply
<= 1.3 x (an apply that changes nothing + ``uv pip install`` by hand with an empty cache);
a restore's whole apply <= 1.3 x (an apply that changes nothing + unpacking the archive by
hand); naive / role >= 100 x. For 2 and 3 the table gives the whole ``pyinfra`` run
(connect, probe, uv upload, build) and the venv operation alone (from its log's
timestamps). Then ``import pandas`` is timed from each venv, first and again.

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
from podstate.sandbox import lifecycle, ssh

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
        result = ssh.ssh(pod, command, timeout=timeout)
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


def run(
    rtt_ms: float,
    naive_timeout: int,
    wheels: Path,
    repeat: int,
    index: tuple[float, float] | None = (50.0, 50.0),
) -> dict[str, Any]:
    """Run the cases (2 to 5 ``repeat`` times, for medians); return the raw results.

    ``index``: the remote index's round trip (ms) and rate (MB/s) for case 5; None skips it.
    """
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
            lifecycle.up(pods=5, disk="6G", storage_route=route)
            pods = Pods(state, vars_dir)
            tar = subprocess.run(["tar", "-C", str(wheels), "-cf", "-", "."], capture_output=True)
            for pod in (NAIVE_POD, ROLE_POD):
                result = ssh.ssh(
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
            role, restore, pack, unpack = [], [], [], []
            for _ in range(repeat):  # each time from an empty container disk and volume
                pods.out(ROLE_POD, f"{wipe} /workspace/.podstate")
                pods.want(ROLE_POD, venv)
                role.append((pods.apply(ROLE_POD), pods.operation_seconds(ROLE_POD)))
                pods.want(ROLE_POD, {**venv, "snapshot": "/workspace/.podstate/venv"})
                pack.append(pods.apply(ROLE_POD))
                pods.out(ROLE_POD, wipe)
                restore.append((pods.apply(ROLE_POD), pods.operation_seconds(ROLE_POD)))
                unpack.append(unpack_by_hand(pods))
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
            results["floor"]["unpack_s"] = statistics.median(unpack)
            results["floor"]["unpack_runs_s"] = unpack
            if index:
                results["remote"] = remote(pods, wheels, repeat, *index)
                print(f"remote: {results['remote']}", file=sys.stderr)
            results["load"] = f"{os.getloadavg()[0]:.1f}"
            print(f"floor: {results['floor']}", file=sys.stderr)
            if naive_timeout:
                results["naive"] = naive(pods, naive_timeout)
                print(f"naive: {results['naive']}", file=sys.stderr)
        finally:
            lifecycle.down()
    return results


def floor(pods: Pods, repeat: int) -> dict[str, Any]:
    """Time ``uv pip install`` by hand into local disk, with a cache it has filled before.

    Also with an empty cache (``cold_s``), as on a fresh pod: what the role's build pays.
    """
    from uv import find_uv_bin

    with open(find_uv_bin(), "rb") as binary:
        ssh.ssh(ROLE_POD, "cat > /usr/local/bin/uv && chmod 755 /usr/local/bin/uv", binary.read())
    # What the role installs: the packages, pip from the interpreter's own wheel, bytecode.
    install = (
        "export UV_NO_CONFIG=1 UV_CACHE_DIR={1}; "
        "w=$(ls /usr/lib/python3*/ensurepip/_bundled/pip-*.whl "
        "/usr/share/python-wheels/pip-*.whl 2>/dev/null | tail -n 1); "
        "uv venv -q --python /usr/bin/python3 {0} && "
        "uv pip install -q --compile-bytecode --python {0}/bin/python "
        "--find-links /opt/wheelhouse --no-index " + " ".join(PACKAGES) + ' "$w"'
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


def unpack_by_hand(pods: Pods) -> float:
    """Return the time of unpacking the snapshot archive by hand from the volume into local
    disk, in one ``ssh`` command, as the role's restore does it (without its checks)."""
    current = pods.out(ROLE_POD, "cat /workspace/.podstate/venv/current").split()
    archive, compressor = f"/workspace/.podstate/venv/{current[1]}", current[2]
    pods.out(ROLE_POD, "rm -rf /opt/unpacked")
    start = time.perf_counter()
    pods.out(
        ROLE_POD, f"mkdir /opt/unpacked && {compressor} -dc {archive} | tar -xf - -C /opt/unpacked"
    )
    took = time.perf_counter() - start
    pods.out(ROLE_POD, "rm -rf /opt/unpacked")
    return took


def remote(pods: Pods, wheels: Path, repeat: int, rtt_ms: float, mbs: float) -> dict[str, Any]:
    """Time the role with packages from a remote index: the wheels served over HTTP through
    the latency proxy (``rtt_ms``, ``mbs`` MB/s each way). Each time from a wiped container
    disk: a build (no snapshot), then a restore from the snapshot it packed."""
    with (
        latency_proxy.routes(rtt_ms, rate_mbs=mbs) as route,
        subprocess.Popen(
            [str(BIN / "python"), "-m", "http.server", "-b", "127.0.0.1", "-d", str(wheels), "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ) as server,
    ):
        try:
            line = server.stdout.readline() if server.stdout else ""
            port = int(re.search(r"port (\d+)", line)[1])  # type: ignore[index]
            url = f"http://127.0.0.1:{route(port)}/"
            venv = {
                "path": "/opt/venv",
                "packages": PACKAGES,
                "find_links": [url],
                "no_index": True,
            }
            wipe = "rm -rf /opt/venv /opt/.venv-* /opt/.podstate /scratch/uv /scratch/pip"
            build, restore = [], []
            for _ in range(repeat):
                pods.out(ROLE_POD, f"{wipe} /workspace/.podstate")
                pods.want(ROLE_POD, venv)
                build.append((pods.apply(ROLE_POD), pods.operation_seconds(ROLE_POD)))
                pods.want(ROLE_POD, {**venv, "snapshot": "/workspace/.podstate/venv"})
                pods.apply(ROLE_POD)
                pods.out(ROLE_POD, wipe)
                restore.append((pods.apply(ROLE_POD), pods.operation_seconds(ROLE_POD)))
                print(f"remote build {build[-1]}, restore {restore[-1]}", file=sys.stderr)
        finally:
            server.terminate()
    return {"rtt_ms": rtt_ms, "mbs": mbs, "build": _median(build), "restore": _median(restore)}


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
    result = ssh.ssh(NAIVE_POD, command, timeout=timeout + 120)
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


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write bench/results/venv.md; returns the exit status."""
    parser = argparse.ArgumentParser(prog="bench.venv", description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=10.0, help="network volume round trip")
    parser.add_argument("--naive-timeout", type=int, default=1200, help="cap on case 1, in seconds")
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="wheelhouse directory")
    parser.add_argument("--repeat", type=int, default=3, help="runs of cases 2-5 (medians)")
    parser.add_argument("--index-rtt-ms", type=float, default=50.0, help="remote index round trip")
    parser.add_argument("--index-mbs", type=float, default=50.0, help="remote index MB/s")
    parser.add_argument("--no-remote", action="store_true", help="skip case 5")
    parser.add_argument("--note", default="", help="a line for the report (what was reduced)")
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
        index = None if args.no_remote else (args.index_rtt_ms, args.index_mbs)
        results = run(args.rtt_ms, timeout, wheelhouse(args.wheels), args.repeat, index)
        if args.note:
            results["note"] = args.note
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
