"""One cycle of the fleet benchmark: fresh sandbox pods behind the latency proxy.

``cycle`` times every step once on them, then takes them down. Each podstate step's remote
commands are recorded and replayed with OpenSSH (bench/fleet/rivals/replay.py) from the state
the step found: at once for a check and a noop apply; after an apply back to the state
before it for a reconfigure; on pods restarted (fresh container disks) for the first apply,
last. After each replay a check must be clean.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common.pods import SANDBOX_DISK, Proxy, proxied_pods_file, vars_dir
from bench.common.steps import APPLY, CHECK, environ, floor, timed, tool_env
from bench.fleet.rivals.ansible import add_ansible_blocks, ansible
from bench.fleet.rivals.plain import plain, plain_hosts
from bench.fleet.rivals.replay import Recorded, recorded, recording, replay


def reconfigure(vars_path: Path, value: str | None) -> None:
    """Change one ``env`` value for every pod (``BENCH_RECONFIGURED``, in group_vars); None
    removes it, as the shipped state has it."""
    all_yaml = vars_path / "group_vars" / "all.yaml"
    data = yaml.safe_load(all_yaml.read_text()) or {}
    if value is None:
        data.get("env", {}).pop("BENCH_RECONFIGURED", None)
    else:
        data.setdefault("env", {})["BENCH_RECONFIGURED"] = value
    all_yaml.write_text(yaml.safe_dump(data, sort_keys=False))


def nvidia_smi_delay(seconds: float) -> None:
    """Make every call of every sandbox pod's nvidia-smi take ``seconds`` (0: none)."""
    from podstate.sandbox import inside, lifecycle
    from podstate.sandbox.shapes import GPU_LAYOUT

    for pod in lifecycle.status():
        if pod.shape.gpus:
            add = f"; echo 'delay|{seconds:g}' >> {GPU_LAYOUT}" if seconds else ""
            inside.pod_exec(pod.name, f"sed -i '/^delay|/d' {GPU_LAYOUT}{add}")


@dataclass
class Cycle:
    """One cycle's fleet: its sandbox, the proxy in front of it and what the tools get."""

    work: Path
    state: Path
    proxy: Proxy
    pods_file: Path
    vars_path: Path
    env: dict[str, str]
    steps: dict[str, Any] = field(default_factory=dict)

    def podstate(self, step: str, name: str, command: list[str]) -> dict[int, list[Recorded]]:
        """Time a podstate command as ``step``; return the remote commands it sent."""
        record = self.work / "record"
        self.steps[step], _ = timed(name, command, recording(self.env, record), self.state)
        return recorded(record)

    def same_work(self, step: str, commands: dict[int, list[Recorded]]) -> None:
        """Time ``commands`` replayed with OpenSSH as ``step``; then a check must be clean."""
        self.steps[step] = replay(commands, self.pods_file, self.state, self.work)
        timed(f"check after {step}", CHECK, self.env, self.state)

    def restart_all(self) -> None:
        """Restart every pod (container disks wiped) and take their new host keys."""
        from podstate.sandbox import container, lifecycle

        for pod in lifecycle.status():
            container.restart(pod.name)
        proxied_pods_file(self.state, self.proxy.ports, self.work)


def cycle(
    pods: int, rtt_ms: float, run: int, with_ansible: bool, delay: float = 0
) -> dict[str, Any]:
    """Measure every step once on ``pods`` fresh sandbox pods at ``rtt_ms``; return a sample.

    With ``delay``, check and noop are timed again with every nvidia-smi call taking that
    many seconds.
    """
    from podstate.sandbox import lifecycle

    work = Path(tempfile.mkdtemp(prefix="podstate-bench-"))
    state = work / "sandbox"
    sample: dict[str, Any] = {
        "pods": pods,
        "rtt_ms": rtt_ms,
        "run": run,
        "load_before": os.getloadavg()[0],
        "steps": {},
    }
    proxy: Proxy | None = None
    with environ(PODSTATE_SANDBOX=str(state)):
        try:
            lifecycle.up(pods, disk=SANDBOX_DISK)
            targets = [p.port for p in lifecycle.status()]
            proxy = Proxy(targets, rtt_ms)
            pods_file = proxied_pods_file(state, proxy.ports, work)
            vars_path = vars_dir(work, pods)
            env = tool_env(pods_file, vars_path)
            c = Cycle(work, state, proxy, pods_file, vars_path, env, sample["steps"])
            first = c.podstate("first", "first apply", APPLY)
            c.steps["floor"] = floor(pods_file, state)
            c.same_work("same_check", c.podstate("check", "check", CHECK))
            c.same_work("same_noop", c.podstate("noop", "noop apply", APPLY))
            reconfigure(vars_path, f"run-{run}")
            changed = c.podstate("reconfigure", "reconfigure", APPLY)
            reconfigure(vars_path, None)  # back to the state the reconfigure started from
            timed("apply before the reconfigure's replay", APPLY, env, state)
            reconfigure(vars_path, f"run-{run}")
            c.same_work("same_reconfigure", changed)
            if delay:
                nvidia_smi_delay(delay)
                c.steps["check_slow"], _ = timed("check, slow nvidia-smi", CHECK, env, state)
                c.steps["noop_slow"], _ = timed("noop, slow nvidia-smi", APPLY, env, state)
                nvidia_smi_delay(0)
            if with_ansible:
                add_ansible_blocks([p.name for p in lifecycle.status()])
                c.steps["ansible"] = ansible(pods, pods_file, vars_path, work, env, state)
            hosts = plain_hosts(pods_file, vars_path, work)
            plain("plain pyinfra, its hooks", hosts, env, state, changes=True)
            c.steps["plain_noop"] = plain("plain pyinfra noop", hosts, env, state, changes=False)
            reconfigure(vars_path, f"run-{run}-plain")
            hosts = plain_hosts(pods_file, vars_path, work)
            c.steps["plain_reconfigure"] = plain(
                "plain pyinfra reconfigure", hosts, env, state, changes=True
            )
            c.restart_all()  # fresh container disks, as the first apply found them
            reconfigure(vars_path, None)
            c.same_work("same_first", first)
        finally:
            if proxy is not None:
                proxy.stop()
            lifecycle.down()
            shutil.rmtree(work, ignore_errors=True)
    sample["load_after"] = os.getloadavg()[0]
    return sample
