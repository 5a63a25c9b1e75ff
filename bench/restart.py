"""Restart benchmark: how long a restarted pod waits for ``podstate watch`` to put it back.

On fresh sandbox pods behind the latency proxy (bench/latency_proxy.py), listed by a RunPod
API that this module serves (the sandbox API's documents, their SSH ports those of the
proxy, the API itself behind the proxy too), one run:

* converges every pod (``pyinfra -y inventories/pods.py deploy/pod.py``, the API inventory);
* times the reference: a quarter of the pods restarted (``container.restart``), then the apply
  a watch pass runs for them (``pyinfra -y --json --limit POD ... inventories/pods.py
  deploy/pod.py``), once before the watch starts and once after it stopped;
* starts ``podstate watch --json`` with its defaults (every deploy file, ``--interval`` 30 s)
  and, in each cycle, restarts another quarter of the pods together, at evenly spread points
  of the watch's interval: their SSH is up again ``lead`` seconds before the watch's next
  listing, in cycle k of n (from 0) ``(n - k) / n`` of an interval less ``MARGIN_S``; the
  first cycle is the worst case, a restart just after a listing;
* for each restarted pod, from its SSH being up again (``container.restart`` returned: its new
  sshd answers) to its being ready: ``podstate-ready`` exits 0 on the pod, polled there
  every 0.2 s through one SSH session opened at once (the pod's own clock, which is this
  machine's, says when).

The floor is the watch's interval plus one reference apply: a pod restarted just after a
listing waits a whole interval, then the apply. ``--report`` rebuilds restart.md from
restart.json alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hmac
import json
import os
import queue
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.cycle import SANDBOX_DISK, Proxy, vars_dir
from bench.machine import machine
from bench.steps import APPLY, BIN, ROOT, BenchError, environ, timed
from podstate.jsonfile import write_json
from podstate.sandbox import container, lifecycle, ssh
from podstate.sandbox.api import list_pods
from podstate.sandbox.state import SandboxError

RESULTS = ROOT / "bench" / "results"
SPEC = ROOT / "tests" / "fixtures" / "runpod" / "runpod-openapi-v2.json"
INTERVAL_S = 30.0  # podstate watch's default --interval, which the bench does not pass
TARGET_S = 45.0  # the issue's: every restarted pod ready again within 45 s
QUARTERS = 4  # a quarter of the pods restarts in each cycle
MARGIN_S = 1.0  # after a pass starts, its listing is done (one GET through the proxy)
POLL_S = 0.2  # how often the pod asks podstate-ready
READY_TIMEOUT_S = 300  # a pod not ready by then is reported as not ready, never as a time
# On the pod: wait for podstate-ready, then print the pod's clock (this machine's).
WAIT_READY = (
    f"until /usr/local/bin/podstate-ready 2>/dev/null; do sleep {POLL_S}; done; date +%s.%N"
)


# --- the RunPod API the watch lists, through the proxy --------------------------------------


def proxied_document(doc: dict[str, Any], ports: dict[int, int]) -> dict[str, Any]:
    """Return a ``GET /v2/pods`` answer with every pod's SSH port replaced by the proxy's
    (``ports``: sandbox port to proxy port), so that podstate reaches the pods through it."""
    pods = []
    for pod in doc["pods"]:
        pod = json.loads(json.dumps(pod))
        direct = (pod.get("ssh") or {}).get("direct")
        if direct:
            direct["port"] = ports[direct["port"]]
            direct["command"] = f"ssh root@{direct['host']} -p {direct['port']}"
        for mapping in (pod.get("runtime") or {}).get("ports") or []:
            mapping["public"] = ports.get(mapping["public"], mapping["public"])
        pods.append(pod)
    return {"pods": pods}


def spec_errors(doc: dict[str, Any]) -> list[str]:
    """Return why ``doc`` is not a ``ListPodsResponse`` of RunPod's OpenAPI document (none:
    the real API could send it), each as ``path: message``."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    spec = json.loads(SPEC.read_text())
    registry = Registry().with_resource(
        "urn:runpod-openapi-v2", Resource.from_contents(spec, default_specification=DRAFT202012)
    )
    validator = Draft202012Validator(
        {"$ref": "urn:runpod-openapi-v2#/components/schemas/ListPodsResponse"}, registry=registry
    )
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]


class Api:
    """``GET /v2/pods`` for the sandbox in ``state``, pods behind the proxy: a thread of this
    process (one request per watch pass). Set ``ports`` before the first request."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.key = "rpa_bench_" + secrets.token_hex(16)
        self.ports: dict[int, int] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's API
                given = (self.headers.get("Authorization") or "").encode()
                if not hmac.compare_digest(given, f"Bearer {api.key}".encode()):
                    status, doc = 401, {"title": "Unauthorized", "status": 401}
                elif self.path.split("?")[0].rstrip("/") != "/v2/pods":
                    status, doc = 404, {"title": "Not Found", "status": 404}
                else:
                    status, doc = 200, api.document()
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def document(self) -> dict[str, Any]:
        """Return the answer to ``GET /v2/pods`` now: the sandbox API's, through the proxy."""
        return proxied_document(list_pods(self.state), self.ports)

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


# --- the watch, the restarts, the pods' ready times -----------------------------------------


class Watching:
    """``podstate watch --json`` at its defaults; every event with the time it was read."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.stderr = log.open("w")
        self.process = subprocess.Popen(
            [str(BIN / "podstate"), "watch", "--json"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, start_new_session=True,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout or []:
            self._lines.put((time.time(), line))
        self._lines.put(None)

    def until(self, wanted, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """Return the next event ``wanted`` accepts (``read_at`` added: this machine's time
        when it came), keeping every event; BenchError when the watch ends or goes quiet."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise BenchError(f"watch: no awaited event within {timeout:.0f} s") from None
            if item is None:
                raise BenchError(f"watch ended with status {self.process.wait()}")
            event = json.loads(item[1]) | {"read_at": item[0]}
            self.events.append(event)
            if wanted(event):
                return event

    def end_of_pass(self, number: int | None = None) -> dict[str, Any]:
        """Return the fleet's line that ends pass ``number``, read already or not (None:
        the next one not read yet)."""

        def wanted(e: dict[str, Any]) -> bool:
            return e["pod"] is None and e["seen"] == "pass" and number in (None, e["pass"])

        if number is not None:
            for event in self.events:
                if wanted(event):
                    return event
        return self.until(wanted)

    def stop(self) -> int:
        """SIGTERM the watch (it finishes an apply in flight); return its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        self.stderr.close()
        return status


def pass_start(end: dict[str, Any]) -> float:
    """Return when a pass began (its listing), from the line that ends it."""
    return end["read_at"] - end["seconds"]


def restart(names: list[str]) -> dict[str, float]:
    """Restart the pods one after the other (a few tenths of a second each); return when
    each one's SSH was up again.

    Not from threads at once: a pod's stop sweeps its old namespaces for stragglers, and
    Linux gives their freed numbers to the next namespaces made, another pod's new ones.
    """
    up: dict[str, float] = {}
    for name in names:
        try:
            container.restart(name)
        except SandboxError as error:
            raise BenchError(f"restart: {error}") from None
        up[name] = time.time()
    return up


def watch_ready(name: str) -> subprocess.Popen:
    """Start waiting on pod ``name`` for ``podstate-ready`` (direct SSH, no proxy: the
    pod's own answer, not the link's); its stdout is the pod's time when it was ready."""
    return subprocess.Popen(
        [*ssh.ssh_command(name), WAIT_READY],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def ready_at(process: subprocess.Popen, deadline: float) -> float | None:
    """Return the pod's time when it was ready; None when it was not by ``deadline``."""
    try:
        out, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None
    try:
        return float(out.strip().splitlines()[-1]) if process.returncode == 0 else None
    except (ValueError, IndexError):
        return None


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


# --- the report -----------------------------------------------------------------------------


def summary(raw: dict[str, Any]) -> dict[str, Any]:
    """Return the figures of a run: every restarted pod's time to ready (None: not ready in
    time), their median and max, the floor (interval + the references' median apply) and
    the ratios to it, and whether every pod was ready within the target."""
    times = [p["seconds"] for c in raw["cycles"] for p in c["pods"].values()]
    done = [t for t in times if t is not None]
    apply_s = statistics.median(r["apply"]["seconds"] for r in raw["references"])
    floor = raw["settings"]["interval_s"] + apply_s
    median = statistics.median(done) if done else None
    most = max(done) if len(done) == len(times) and done else None  # unknown if any missing
    return {
        "samples": len(times),
        "not_ready": len(times) - len(done),
        "failed_applies": sum(
            p.get("failed", 0) for c in raw["cycles"] for p in c["pods"].values()
        ),
        "median_s": median,
        "max_s": most,
        "reference_apply_s": apply_s,
        "floor_s": floor,
        "median_ratio": None if median is None else median / floor,
        "max_ratio": None if most is None else most / floor,
        "target_s": TARGET_S,
        "met": most is not None and most <= TARGET_S,
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def report(raw: dict[str, Any]) -> str:
    """Return the Markdown report of the raw results."""
    s, settings, m = summary(raw), raw["settings"], raw["machine"]
    applies = ", ".join(_fmt(r["apply"]["seconds"], 2) for r in raw["references"])
    lines = [
        "# Restarts: time until `podstate watch` has a restarted pod ready again",
        "",
        f"`make bench-restart` (bench/restart.py), {raw['started']}: {settings['pods']} sandbox "
        f"pods at {settings['rtt_ms']:g} ms RTT (bench/latency_proxy.py, the RunPod API behind "
        f"it too), `podstate watch --json` at its default interval ({settings['interval_s']:g} "
        f"s), {settings['restarted']} pods restarted one after the other in each of "
        f"{len(raw['cycles'])} cycles. Time from a pod's SSH being up again (`container.restart` "
        f"returned) to `podstate-ready` exiting 0 on it (polled on the pod every "
        f"{settings['poll_s']:g} s). Raw: [restart.json](restart.json).",
        "",
        "| | seconds |",
        "|---|---|",
        f"| restarted pods, median | {_fmt(s['median_s'])} |",
        f"| restarted pods, max | {_fmt(s['max_s'])} |",
        f"| floor: interval + one apply of {settings['restarted']} restarted pods "
        f"({applies} s, median {_fmt(s['reference_apply_s'], 2)}) | {_fmt(s['floor_s'])} |",
        f"| *median / floor* | {_fmt(s['median_ratio'], 2)} |",
        f"| *max / floor* | {_fmt(s['max_ratio'], 2)} |",
        "",
        f"Target: every restarted pod ready again within {s['target_s']:g} s, with no human: "
        + ("**met**" if s["met"] else "**not met**")
        + (f" ({s['not_ready']} of {s['samples']} not ready)" if s["not_ready"] else "")
        + f"; {s['failed_applies']} failed applies in the watch.",
        "",
        "## Each cycle",
        "",
        "Restarts land at evenly spread points of the watch's interval (the lead: how long "
        "before its next listing the pods' SSH was up), so the cycles sample the whole "
        "interval; the first lands just after a listing, the worst case: the pods wait the "
        "whole interval, then the apply (the floor). *Wait*: from SSH up to the start of the "
        "pass that applied; *listing + apply*: from there to ready.",
        "",
        "| cycle | lead, s | pod | pass | wait, s | listing + apply, s | ready after, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for number, c in enumerate(raw["cycles"], 1):
        for name, p in c["pods"].items():
            wait = p.get("wait_s")
            rest = None if p["seconds"] is None or wait is None else p["seconds"] - wait
            check = " (check)" if p.get("check_pass") else ""
            lines.append(
                f"| {number} | {c['lead_s']:.0f} | {name} | {p.get('pass', '–')}{check} | "
                f"{_fmt(wait)} | {_fmt(rest)} | {_fmt(p['seconds'])} |"
            )
    converge = raw.get("converge", {}).get("seconds")
    commands = max(r["apply"]["commands"]["max"] for r in raw["references"])
    lines += [
        "",
        "## Parameters",
        "",
        f"- Pods: {settings['pods']}, converged first ({_fmt(converge, 2)} s); restarted "
        f"per cycle: {settings['restarted']} (every fourth pod, a different quarter each "
        "cycle); the reference apply's pods (the last quarter) restarted and applied to "
        "by hand, before the watch started and after it stopped, with the command a watch "
        f"pass runs (at most {commands} remote commands per pod).",
        "- Desired state: the shipped `deploy/pod.py` and group_vars less `venv` (as in "
        "`make bench`: a venv would be built from the network), pod-3's `shm.min_size` "
        "32M. Sandbox pods restart in a few tenths of a second; on RunPod the container "
        "start comes first, and the time here counts from SSH up.",
        f"- Watch exit status after SIGTERM: {raw.get('watch_status', '–')}.",
        f"- Machine: {m['cores']} cores, {m['cpu']}, {m['memory_gib']} GiB, Linux "
        f"{m['kernel']}, Python {m['python']}, pyinfra {m['pyinfra']}, paramiko "
        f"{m['paramiko']}; load {raw['load_before']:.2f} before, "
        f"{_fmt(raw.get('load_after'), 2)} after; {_fmt(raw.get('elapsed_s'), 0)} s in all.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or only rebuild the report); return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.restart", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pods", type=int, default=24, help="pods (default 24)")
    parser.add_argument("--rtt", type=float, default=150.0, help="round-trip ms (default 150)")
    parser.add_argument("--cycles", type=int, default=4, help="restart cycles (default 4)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--report", action="store_true", help="only rebuild restart.md")
    args = parser.parse_args(argv)
    try:
        if args.report:
            raw = json.loads((args.out / "restart.json").read_text())
        else:
            if os.geteuid() != 0:
                raise BenchError("the benchmark needs root (sandbox pods); run it as root")
            if args.pods < QUARTERS or args.cycles < 1 or args.rtt < 0:
                raise BenchError(f"--pods must be at least {QUARTERS}, --cycles 1, --rtt >= 0")
            raw = measure(args.pods, args.rtt, args.cycles, args.out)
        (args.out / "restart.md").write_text(report(raw))
    except (BenchError, OSError, subprocess.SubprocessError, ValueError) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    s = summary(raw)
    print(f"ready again after median {_fmt(s['median_s'])} s, max {_fmt(s['max_s'])} s "
          f"(floor {_fmt(s['floor_s'])} s); wrote {args.out / 'restart.md'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
