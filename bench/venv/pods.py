"""The venv benchmark's pods and wheels: the packages, the wheelhouse fetched once, and the
sandbox pods reached by ssh and pyinfra as a user would."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common.steps import BIN, ROOT
from podstate.sandbox import ssh

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
# What a case removes from the role's pod: its venv, the role's records and the caches (with
# /workspace/.podstate: the snapshot on the volume too).
WIPE = "rm -rf /opt/venv /opt/.venv-* /opt/.podstate /scratch/uv /scratch/pip"
IMPORT = (
    "import time; t = time.perf_counter(); import pandas; print(round(time.perf_counter() - t, 3))"
)


def wanted_venv(find_links: str) -> dict[str, Any]:
    """Return the ``venv:`` section of the benchmark's packages from ``find_links`` alone."""
    return {
        "path": "/opt/venv",
        "packages": PACKAGES,
        "find_links": [find_links],
        "no_index": True,
    }


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

    def build_and_restore(
        self, venv: dict[str, Any]
    ) -> tuple[tuple[float, float], float, tuple[float, float]]:
        """On the role's pod, from an empty container disk and volume: apply ``venv`` (a
        build), then with its snapshot (a pack), then again on a wiped container disk (a
        restore); return the build's and the restore's (whole apply, venv operation) and the
        pack's whole apply, in seconds."""
        self.out(ROLE_POD, f"{WIPE} /workspace/.podstate")
        self.want(ROLE_POD, venv)
        build = (self.apply(ROLE_POD), self.operation_seconds(ROLE_POD))
        self.want(ROLE_POD, {**venv, "snapshot": "/workspace/.podstate/venv"})
        pack = self.apply(ROLE_POD)
        self.out(ROLE_POD, WIPE)
        return build, pack, (self.apply(ROLE_POD), self.operation_seconds(ROLE_POD))

    def operation_seconds(self, pod: str) -> float:
        """Return how long the last venv operation took, from its log's timestamps."""
        log = self.out(pod, "cat /opt/.podstate/venv.log")
        marks = [float(m) for m in re.findall(r"(?:started|done) at ([0-9.]+)", log)]
        return marks[-1] - marks[0]

    def import_seconds(self, pod: str, python: str) -> tuple[float, float]:
        """Return (first, second) times of ``import pandas`` from an interpreter on ``pod``."""
        command = f"{python} -c {shlex.quote(IMPORT)}"
        return float(self.out(pod, command).split()[-1]), float(self.out(pod, command).split()[-1])
