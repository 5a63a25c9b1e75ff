"""One run of the restart benchmark: sandbox pods behind the latency proxy and the API, the
reference applies, and the cycles that restart a quarter of the pods under the watch.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.machine import machine
from bench.common.pods import SANDBOX_DISK, Proxy, vars_dir
from bench.common.steps import APPLY, BIN, BenchError, environ, timed
from bench.restart.api import Api, spec_errors
from bench.restart.watch import (
    POLL_S,
    READY_TIMEOUT_S,
    Watching,
    pass_start,
    ready_at,
    restart,
    watch_ready,
)
from podstate.jsonfile import write_json
from podstate.sandbox import lifecycle

INTERVAL_S = 30.0  # podstate watch's default --interval, which the bench does not pass
QUARTERS = 4  # a quarter of the pods restarts in each cycle
MARGIN_S = 1.0  # after a pass starts, its listing is done (one GET through the proxy)


def quarter(names: list[str], k: int) -> list[str]:
    """Return the pods of quarter ``k`` (every fourth pod, from the k-th): all shapes."""
    return names[k % QUARTERS :: QUARTERS]


def reference(names: list[str], env: dict[str, str], state: Path) -> dict[str, Any]:
    """Restart ``names`` and time the apply a watch pass runs for them; return both."""
    began = time.time()
    up = restart(names)
    limits = [arg for name in names for arg in ("--limit", name)]
    command = [str(BIN / "pyinfra"), "-y", "--json", *limits, *APPLY[2:]]
    step, _ = timed("reference apply", command, env, state)
    return {"pods": names, "restart_s": max(up.values()) - began, "apply": step}


def cycle(
    watching: Watching, names: list[str], lead: float, restart_s: float, last_end: dict
) -> dict[str, Any]:
    """Restart ``names`` so that their SSH is up ``lead`` seconds before the watch's next
    listing (a later one when that is too soon; ``restart_s``: what restarting them takes),
    wait until each is ready and the watch has said so; return each pod's times."""
    start = pass_start(last_end) + INTERVAL_S
    while start - lead - restart_s < time.time():
        start += INTERVAL_S
    time.sleep(start - lead - restart_s - time.time())
    up = restart(names)
    waiting = {name: watch_ready(name) for name in names}
    deadline = time.monotonic() + READY_TIMEOUT_S
    ready = {name: ready_at(process, deadline) for name, process in waiting.items()}
    pods: dict[str, dict[str, Any]] = {name: {"up_at": up[name], "failed": 0} for name in names}
    left = {name for name in names if ready[name] is not None}
    while left:
        event = watching.until(lambda e: e["pod"] in left and e["result"] in ("ok", "failed"))
        if event["result"] == "failed":
            pods[event["pod"]]["failed"] += 1
        else:
            left.discard(event["pod"])
            pods[event["pod"]].update(pass_=event["pass"], ok_at=event["read_at"])
    applied = {p["pass_"] for p in pods.values() if "pass_" in p}
    ends = {n: watching.end_of_pass(n) for n in sorted(applied)}
    for name, pod in pods.items():
        pod["ready_at"] = ready[name]
        pod["seconds"] = None if ready[name] is None else ready[name] - pod["up_at"]
        if "pass_" in pod:
            pod["pass"] = pod.pop("pass_")
            pod["wait_s"] = pass_start(ends[pod["pass"]]) - pod["up_at"]
            pod["check_pass"] = ends[pod["pass"]]["action"] == "check"
    last = ends[max(applied)] if applied else watching.end_of_pass()
    return {"lead_s": lead, "pods": pods, "last_end": last}


def measure(pods: int, rtt_ms: float, cycles: int, out: Path) -> dict[str, Any]:
    """Run the whole benchmark, saving the raw JSON as it goes; return the raw results."""
    raw: dict[str, Any] = {
        "machine": machine(),
        "settings": {"pods": pods, "rtt_ms": rtt_ms, "cycles": cycles,
                     "restarted": len(quarter(list(range(pods)), 0)),
                     "interval_s": INTERVAL_S, "poll_s": POLL_S},
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": os.getloadavg()[0],
        "references": [],
        "cycles": [],
    }  # fmt: skip
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="podstate-bench-"))
    state = work / "sandbox"
    proxy: Proxy | None = None
    api: Api | None = None
    watching: Watching | None = None

    def save() -> None:
        raw["elapsed_s"] = round(time.monotonic() - began, 1)
        write_json(out / "restart.json", raw, indent=1)

    with environ(PODSTATE_SANDBOX=str(state)):
        try:
            print(f"{pods} sandbox pods at {rtt_ms:g} ms", flush=True)
            lifecycle.up(pods, disk=SANDBOX_DISK)
            names = [p.name for p in lifecycle.status()]
            api = Api(state)
            proxy = Proxy([p.port for p in lifecycle.status()] + [api.port], rtt_ms)
            api.ports = proxy.ports
            errors = spec_errors(api.document())
            if errors:
                raise BenchError(f"the bench's API answer is not RunPod's: {errors[0]}")
            ours = ("PODSTATE_", "RUNPOD_")
            env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
            env.update(
                RUNPOD_API_URL=f"http://127.0.0.1:{proxy.ports[api.port]}",
                RUNPOD_API_KEY=api.key,
                PODSTATE_SSH_KEY=str(state / "id_ed25519"),
                PODSTATE_HOSTKEYS=str(work / "hostkeys"),
                PODSTATE_VARS=str(vars_dir(work, pods)),
                PODSTATE_SANDBOX=str(state),
            )
            raw["converge"], _ = timed("converge", APPLY, env, state)
            print(f"    converged in {raw['converge']['seconds']:.2f}s", flush=True)
            spare = quarter(names, QUARTERS - 1)
            raw["references"].append(reference(spare, env, state))
            print(f"    reference apply {raw['references'][-1]['apply']['seconds']:.2f}s")
            save()
            watching = Watching(env, work / "watch.log")
            last_end = watching.end_of_pass(1)
            for k in range(cycles):
                lead = INTERVAL_S * (cycles - k) / cycles - MARGIN_S
                restart_s = raw["references"][0]["restart_s"]
                result = cycle(watching, quarter(names, k), lead, restart_s, last_end)
                last_end = result.pop("last_end")
                raw["cycles"].append(result)
                times = [p["seconds"] for p in result["pods"].values()]
                print(
                    f"[{k + 1}/{cycles}] restarted {lead:.0f}s before a listing: ready after "
                    + ", ".join("–" if t is None else f"{t:.1f}" for t in times) + " s",
                    flush=True,
                )  # fmt: skip
                save()
            raw["watch_status"] = watching.stop()
            raw["events"] = watching.events
            raw["references"].append(reference(spare, env, state))
            print(f"    reference apply {raw['references'][-1]['apply']['seconds']:.2f}s")
        finally:
            if watching is not None:
                watching.stop()
            if proxy is not None:
                proxy.stop()
            if api is not None:
                api.stop()
            lifecycle.down()
            shutil.rmtree(work, ignore_errors=True)
    raw["load_after"] = os.getloadavg()[0]
    raw["finished"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    save()
    return raw
