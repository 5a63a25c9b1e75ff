"""The scale benchmark's runs: one pod count's apply, no-op apply, check and sharded checks,
each with its wall time and the control process's peak memory."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.common.steps import BIN, ROOT
from podstate.sandbox import lifecycle


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
