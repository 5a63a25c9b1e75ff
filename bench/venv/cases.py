"""The venv benchmark's cases, each timed on sandbox pods: the role's build and restore, the
floors by hand, packages from a remote index, and pip on the network volume."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import latency_proxy
from bench.common.steps import BIN
from bench.venv.pods import NAIVE_POD, PACKAGES, ROLE_POD, WIPE, Pods, wanted_venv
from podstate.sandbox import lifecycle, ssh


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

            venv = wanted_venv("/opt/wheelhouse")
            role, restore, pack, unpack = [], [], [], []
            for _ in range(repeat):  # each time from an empty container disk and volume
                built, packed, restored = pods.build_and_restore(venv)
                role.append(built)
                pack.append(packed)
                restore.append(restored)
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
            pods.out(ROLE_POD, f"{WIPE} /workspace/.podstate")
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
            venv = wanted_venv(url)
            build, restore = [], []
            for _ in range(repeat):
                built, _, restored = pods.build_and_restore(venv)
                build.append(built)
                restore.append(restored)
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
