"""The mixed fleet's case of the fleet benchmark: RunPod pods and Vast instances in one check.

On fresh sandbox pods, half of them (rounded down) Vast instances (``vast-1``, ...; their SSH
sessions start inside tmux, their pods file entries say ``provider: vast``) and the rest
RunPod pods, all behind the latency proxy: one apply converges the fleet (it creates each
instance's ``~/.no_auto_tmux`` over SFTP; not timed), then ``mixed_floor`` times ``ssh pod
true`` to every pod and instance at once, and ``mixed_check`` times ``podstate check``,
which must find every one in state (exit 0).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common.pods import SANDBOX_DISK, Proxy, proxied_pods_file, vars_dir
from bench.common.steps import APPLY, CHECK, environ, floor, timed, tool_env

STEPS = ("mixed_floor", "mixed_check")


def split(pods: int) -> tuple[int, int]:
    """Return how many RunPod pods and Vast instances a mixed fleet of ``pods`` has."""
    return pods - pods // 2, pods // 2


def mixed_vars(work: Path, pods: int) -> Path:
    """Return the cycle's vars directory (``bench.common.pods.vars_dir``) for a mixed fleet of
    ``pods``: every second Vast instance has Vast's 64 MiB /dev/shm, which gets ``shm:
    {min_size: 32M}`` as pod-3 does, so that every pod and instance converges cleanly."""
    runpod, vast = split(pods)
    target = vars_dir(work, runpod)
    for number in range(2, vast + 1, 2):
        (target / "host_vars" / f"vast-{number}.yaml").write_text("shm: {min_size: 32M}\n")
    return target


def mixed(pods: int, rtt_ms: float) -> dict[str, Any]:
    """Return the mixed fleet's steps (``STEPS``) for ``pods`` fresh sandbox pods at
    ``rtt_ms``; none for fewer than 2 pods (no fleet of both kinds)."""
    from podstate.sandbox import lifecycle

    if pods < 2:
        return {}
    work = Path(tempfile.mkdtemp(prefix="podstate-bench-mixed-"))
    state = work / "sandbox"
    proxy: Proxy | None = None
    runpod, vast = split(pods)
    with environ(PODSTATE_SANDBOX=str(state)):
        try:
            lifecycle.up(runpod, disk=SANDBOX_DISK, vast=vast)
            proxy = Proxy([p.port for p in lifecycle.status()], rtt_ms)
            pods_file = proxied_pods_file(state, proxy.ports, work)
            env = tool_env(pods_file, mixed_vars(work, pods))
            timed("mixed fleet's apply", APPLY, env, state)
            steps = {"mixed_floor": floor(pods_file, state)}
            steps["mixed_check"], _ = timed("mixed fleet's check", CHECK, env, state)
        finally:
            if proxy is not None:
                proxy.stop()
            lifecycle.down()
            shutil.rmtree(work, ignore_errors=True)
    return steps
