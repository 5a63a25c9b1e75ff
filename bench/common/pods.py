"""Sandbox pods as the benchmarks see them: their disk, the latency proxy in front of their
SSH ports, the pods file that reaches them through it, and the desired state they get.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from bench.common.steps import ROOT, BenchError

# Above the shipped disk_reserve (2G), as a real pod's container disk is; a sandbox pod's disk
# is a tmpfs, which takes memory only for what is written.
SANDBOX_DISK = "4G"


class Proxy:
    """The latency proxy in front of the sandbox pods' SSH ports."""

    def __init__(self, targets: list[int], rtt_ms: float) -> None:
        # A higher priority than the tools measured: the proxy stands for the network,
        # which takes no CPU from the control machine.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.common.latency_proxy", "--rtt-ms", str(rtt_ms)]
            + [str(port) for port in targets],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=_raise_priority,
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line:
            self.stop()
            raise BenchError("the latency proxy did not start")
        self.ports = {int(target): port for target, port in json.loads(line).items()}

    def stop(self) -> None:
        """End the proxy (SIGTERM, then SIGKILL after 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _raise_priority() -> None:
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -5)


def proxied_pods_file(state: Path, ports: dict[int, int], work: Path) -> Path:
    """Return a copy of the sandbox's pods file whose pods are reached through the proxy.

    Each pod's own known_hosts (renewed at each start: a restart makes a new host key) is
    keyed by ``[127.0.0.1]:port``; the copy's known_hosts holds the same keys under the
    proxy's ports. Written again after a restart, the copy has the new keys.
    """
    known_hosts = work / "known_hosts"
    lines = []
    for own in sorted((state / "pods").glob("*/known_hosts")):
        for line in own.read_text().splitlines():
            host, _, key = line.partition(" ")
            port = int(host.rsplit(":", 1)[1])
            lines.append(f"[127.0.0.1]:{ports[port]} {key}")
    known_hosts.write_text("\n".join(lines) + "\n")
    doc = yaml.safe_load((state / "pods.yaml").read_text())
    doc["defaults"]["ssh_known_hosts_file"] = str(known_hosts)
    for pod in doc["pods"].values():
        pod["ssh_port"] = ports[int(pod["ssh_port"])]
    pods_file = work / "pods.yaml"
    pods_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return pods_file


def vars_dir(work: Path, pods: int) -> Path:
    """Return a vars directory: the shipped group_vars less any ``venv`` key, pod-3 fixed.

    A venv would be built by the first apply from the network; pod-3's 64 MiB /dev/shm gets
    ``shm.min_size: 32M`` so that every pod converges cleanly and every exit status is 0.
    """
    target = work / "vars"
    (target / "host_vars").mkdir(parents=True)
    (target / "group_vars").mkdir()
    for source in sorted((ROOT / "inventories" / "group_vars").glob("*.y*ml")):
        data = yaml.safe_load(source.read_text()) or {}
        data.pop("venv", None)
        (target / "group_vars" / source.name).write_text(yaml.safe_dump(data, sort_keys=False))
    if pods >= 3:
        (target / "host_vars" / "pod-3.yaml").write_text("shm: {min_size: 32M}\n")
    return target
