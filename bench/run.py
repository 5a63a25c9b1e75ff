"""Fleet benchmark: podstate against raw SSH and Ansible, over links with real round-trip time.

For every pod count and round-trip time (RTT), on fresh sandbox pods reached through the
latency proxy (bench/latency_proxy.py), one cycle times, in this order:

* ``first``: ``pyinfra -y inventories/pods.py deploy/pod.py`` on the fresh pods;
* ``floor``: ``ssh -o BatchMode=yes pod true`` to every pod at once (OpenSSH, one process
  per pod, fresh connections, no ControlMaster): the least any tool can cost;
* ``check``: ``podstate check`` on the converged fleet;
* ``noop``: the same apply again, on the converged fleet;
* ``ansible``: ``ansible-playbook --check bench/ansible/fleet.yml``, the same work written for
  Ansible, on the same fleet, once the two ~/.bashrc blocks that Ansible's ``blockinfile``
  adds beside podstate's hooks are in place (its check must then find nothing to change).

Each step's remote commands per pod are counted from the pods' sshd logs. Cycles repeat
``--runs`` times, interleaved (run 1 of every setting, then run 2, ...), and the report
gives medians. ``--report`` rebuilds the Markdown and the plot from the raw JSON alone.

Needs root (sandbox pods) and the ``bench`` extra (ansible-core, matplotlib).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ANSIBLE_DIR = ROOT / "bench" / "ansible"
RESULTS = ROOT / "bench" / "results"
STEPS = ("floor", "check", "noop", "first", "ansible")
LABELS = {
    "floor": "floor: `ssh pod true`, every pod at once",
    "check": "`podstate check`, converged",
    "noop": "noop apply, converged",
    "first": "first apply, fresh pods",
    "ansible": "Ansible `--check`, converged ¹",
}
SESSION = "Starting session: command for "
SANDBOX_DISK = "1G"
STEP_TIMEOUT_S = 600
# Targets from the issue: ratios at 150 ms RTT for 24 and 48 pods, commands per pod.
TARGET_RTT_MS = 150.0
TARGET_PODS = (24, 48)
TARGET_CHECK_FLOOR = 1.3
TARGET_NOOP_FLOOR = 1.5
TARGET_ANSIBLE_CHECK = 5.0
TARGET_CHECK_COMMANDS = 2
TARGET_NOOP_COMMANDS = 3


class BenchError(Exception):
    """A step failed or the machine cannot run the benchmark; the message says which."""


@dataclass
class Settings:
    """What to measure: round-trip times, pod counts, repetitions."""

    rtts_ms: list[float] = field(default_factory=lambda: [150.0, 50.0, 0.0])
    pod_counts: list[int] = field(default_factory=lambda: [8, 24, 48])
    runs: int = 3


# --- the machine ----------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """Return what the results depend on: cores, memory, CPU, kernel and tool versions."""
    cpuinfo = _read("/proc/cpuinfo")
    meminfo = _read("/proc/meminfo")
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    mem_kib = re.search(r"^MemTotal:\s*(\d+)", meminfo, re.M)
    ssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True)
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(int(mem_kib[1]) / 2**20, 1) if mem_kib else None,
        "cpu": model[1].strip() if model else platform.processor(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pyinfra": _version("pyinfra"),
        "paramiko": _version("paramiko"),
        "ansible-core": _version("ansible-core"),
        "openssh": (ssh.stderr or ssh.stdout).strip().split(",")[0],
    }


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


# --- one cycle: fresh pods behind the proxy -------------------------------------------------


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables for the block, then restore the old ones."""
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Proxy:
    """The latency proxy in front of the sandbox pods' SSH ports."""

    def __init__(self, targets: list[int], rtt_ms: float) -> None:
        # A higher priority than the tools measured: the proxy stands for the network,
        # which takes no CPU from the control machine.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.latency_proxy", "--rtt-ms", str(rtt_ms)]
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

    Host keys in the sandbox's known_hosts are keyed by ``[127.0.0.1]:port``; the copy's
    known_hosts holds the same keys under the proxy's ports.
    """
    known_hosts = work / "known_hosts"
    lines = []
    for line in (state / "known_hosts").read_text().splitlines():
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


def exec_counts(state: Path) -> dict[str, int]:
    """Return, per pod, the exec requests (remote commands) its sshd has served so far."""
    return {
        log.parent.name: log.read_text(errors="replace").count(SESSION)
        for log in sorted((state / "pods").glob("*/sshd.log"))
    }


def _per_pod(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    deltas = [after[name] - before.get(name, 0) for name in after]
    return {"min": min(deltas), "max": max(deltas), "mean": statistics.fmean(deltas)}


def _children_cpu() -> float:
    """Return the CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def timed(
    name: str, command: list[str], env: dict[str, str], state: Path, expect: int = 0
) -> tuple[dict[str, Any], str]:
    """Run ``command`` from the repository root; return its time, commands per pod, output.

    Raises BenchError when it exits with another status than ``expect``.
    """
    before = exec_counts(state)
    cpu = _children_cpu()
    start = time.perf_counter()
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
    )
    seconds = time.perf_counter() - start
    if result.returncode != expect:
        raise BenchError(
            f"{name}: exit {result.returncode}, expected {expect}:\n"
            f"{_tail(result.stdout + result.stderr, 20)}"
        )
    step = {
        "seconds": seconds,
        "client_cpu_s": _children_cpu() - cpu,
        "commands": _per_pod(before, exec_counts(state)),
    }
    return step, result.stdout


def floor(pods_file: Path, state: Path) -> dict[str, Any]:
    """Return the time for ``ssh pod true`` to every pod at once, one OpenSSH client each."""
    doc = yaml.safe_load(pods_file.read_text())
    base = [
        "ssh", "-F", "/dev/null", "-i", doc["defaults"]["ssh_key"],
        "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={doc['defaults']['ssh_known_hosts_file']}",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "ControlMaster=no", "-o", "ControlPath=none",
    ]  # fmt: skip
    commands = [
        base + ["-p", str(pod["ssh_port"]), f"root@{pod['ssh_hostname']}", "true"]
        for pod in doc["pods"].values()
    ]
    before = exec_counts(state)
    cpu = _children_cpu()
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            c, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for c in commands
    ]
    errors = [p.communicate(timeout=STEP_TIMEOUT_S)[1] for p in processes]
    seconds = time.perf_counter() - start
    failed = [(p, e) for p, e in zip(processes, errors, strict=True) if p.returncode != 0]
    if failed:
        raise BenchError(f"floor: {len(failed)} ssh failed: {failed[0][1].decode().strip()}")
    return {
        "seconds": seconds,
        "client_cpu_s": _children_cpu() - cpu,
        "commands": _per_pod(before, exec_counts(state)),
    }


def ansible_inventory(pods_file: Path, vars_path: Path, work: Path) -> Path:
    """Return an Ansible inventory of the pods, each with podstate's resolved desired state.

    The desired state comes from podstate's own loader (sizes in bytes, modes filled in),
    so both tools work from the same vars directory.
    """
    from podstate.inventory import load_pods

    with _environ(PODSTATE_PODS=str(pods_file), PODSTATE_VARS=str(vars_path)):
        pods = load_pods()
    hosts: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for pod in pods:
        data = pod.data
        defaults = {
            "ansible_user": data.get("ssh_user", "root"),
            "ansible_ssh_private_key_file": data["ssh_key"],
            "ansible_ssh_common_args": (
                f"-o UserKnownHostsFile={data['ssh_known_hosts_file']} -o StrictHostKeyChecking=yes"
            ),
        }
        hosts[pod.name] = {
            "ansible_host": data["ssh_hostname"],
            "ansible_port": data["ssh_port"],
            "cloud": data["cloud"],
            "podstate": data["podstate"],
        }
    path = work / "ansible-inventory.yaml"
    path.write_text(yaml.safe_dump({"all": {"vars": defaults, "hosts": hosts}}, sort_keys=False))
    return path


def _close_masters(control_dir: Path) -> None:
    """Exit the SSH ControlPersist masters Ansible left running (they would outlive the run)."""
    processes = [
        subprocess.Popen(
            ["ssh", "-F", "/dev/null", "-S", str(sock), "-O", "exit", "pod"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for sock in control_dir.iterdir()
        if sock.is_socket()
    ]
    for process in processes:
        process.wait(30)


def _changed(recap: str) -> int:
    return sum(int(n) for n in re.findall(r"\bchanged=(\d+)", recap))


# What ansible.builtin.blockinfile writes for fleet.yml's two ~/.bashrc hooks.
_HOOK = "[ -r /etc/profile.d/podstate.sh ] && . /etc/profile.d/podstate.sh"
_ANSIBLE_BLOCKS = (
    "f=$HOME/.bashrc; {{ printf '%s\\n' '# BEGIN podstate hook (top)' {hook} "
    "'# END podstate hook (top)'; cat \"$f\"; printf '%s\\n' '# BEGIN podstate hook (end)' "
    '{hook} \'# END podstate hook (end)\'; }} > "$f.new" && mv "$f.new" "$f"'
)


def add_ansible_blocks(names: list[str]) -> None:
    """Give each pod's ~/.bashrc the two blocks Ansible's blockinfile would add to it.

    podstate's hooks carry podstate's markers, Ansible's blockinfile its own, so a fleet
    converged by podstate lacks only those two blocks for Ansible. They are written from
    inside each pod (not over SSH, so no remote command is counted); the timed
    ``--check`` must then find nothing to change, which the cycle asserts.
    """
    import shlex

    from podstate import sandbox

    command = _ANSIBLE_BLOCKS.format(hook=shlex.quote(_HOOK))
    for name in names:
        sandbox.pod_exec(name, command)


def cycle(pods: int, rtt_ms: float, run: int, with_ansible: bool) -> dict[str, Any]:
    """Measure every step once on ``pods`` fresh sandbox pods at ``rtt_ms``; return a sample."""
    from podstate import sandbox

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
    with _environ(PODSTATE_SANDBOX=str(state)):
        try:
            sandbox.up(pods, disk=SANDBOX_DISK)
            targets = [p.port for p in sandbox.status()]
            proxy = Proxy(targets, rtt_ms)
            pods_file = proxied_pods_file(state, proxy.ports, work)
            vars_path = vars_dir(work, pods)
            env = {
                **{k: v for k, v in os.environ.items() if k != "RUNPOD_API_KEY"},
                "PODSTATE_PODS": str(pods_file),
                "PODSTATE_VARS": str(vars_path),
            }
            steps = sample["steps"]
            apply = [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"]
            steps["first"], _ = timed("first apply", apply, env, state)
            steps["floor"] = floor(pods_file, state)
            steps["check"], _ = timed("check", [str(BIN / "podstate"), "check"], env, state)
            steps["noop"], _ = timed("noop apply", apply, env, state)
            if with_ansible:
                add_ansible_blocks([p.name for p in sandbox.status()])
                steps["ansible"] = ansible(pods, pods_file, vars_path, work, env, state)
        finally:
            if proxy is not None:
                proxy.stop()
            sandbox.down()
            shutil.rmtree(work, ignore_errors=True)
    sample["load_after"] = os.getloadavg()[0]
    return sample


def ansible(
    pods: int, pods_file: Path, vars_path: Path, work: Path, env: dict[str, str], state: Path
) -> dict[str, Any]:
    """Return the timed ``ansible-playbook --check`` of fleet.yml on the converged fleet.

    Forks = pods; ControlPersist masters live in a directory of this cycle's and are closed
    afterwards, so every check starts from fresh connections, like the other tools. Raises
    BenchError when the check would change anything: the fleet must be converged.
    """
    control = work / "cp"
    control.mkdir()
    env = {
        **env,
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control),
        "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    playbook = [
        str(BIN / "ansible-playbook"),
        "-i",
        str(ansible_inventory(pods_file, vars_path, work)),
        "--forks",
        str(pods),
        "--check",
        str(ANSIBLE_DIR / "fleet.yml"),
    ]
    try:
        step, output = timed("ansible --check", playbook, env, state)
    finally:
        _close_masters(control)
    changed = _changed(output.split("PLAY RECAP", 1)[-1])
    if changed:
        raise BenchError(f"ansible --check: {changed} task(s) would change a converged fleet")
    return step


# --- the whole run --------------------------------------------------------------------------


def measure(settings: Settings, ansible_runs: int, out: Path) -> dict[str, Any]:
    """Run every cycle, saving the raw JSON after each; return the raw results.

    Cycles are interleaved (every setting once, then again) so that a slow spell of the
    machine spreads over all settings instead of spoiling one. Ansible runs in the first
    ``ansible_runs`` rounds, at non-zero RTTs only.
    """
    raw: dict[str, Any] = {
        "machine": machine(),
        "settings": asdict(settings) | {"ansible_runs": ansible_runs},
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "samples": [],
    }
    raw["startup"] = startup_times()
    total = settings.runs * len(settings.rtts_ms) * len(settings.pod_counts)
    began = time.monotonic()
    for run in range(settings.runs):
        for rtt in settings.rtts_ms:
            for pods in settings.pod_counts:
                with_ansible = run < ansible_runs and rtt > 0
                done = len(raw["samples"])
                print(
                    f"[{done + 1}/{total}] run {run + 1}, {rtt:g} ms, {pods} pods"
                    + (", with Ansible" if with_ansible else ""),
                    flush=True,
                )
                sample = cycle(pods, rtt, run, with_ansible)
                raw["samples"].append(sample)
                print(
                    "    "
                    + ", ".join(
                        f"{step} {sample['steps'][step]['seconds']:.2f}s"
                        for step in STEPS
                        if step in sample["steps"]
                    ),
                    flush=True,
                )
                raw["elapsed_s"] = round(time.monotonic() - began, 1)
                write_json(out / "fleet.json", raw)
    raw["finished"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    write_json(out / "fleet.json", raw)
    return raw


def startup_times(runs: int = 3) -> dict[str, float]:
    """Return each tool's median start-up time: the command that loads it and contacts nothing.

    ``podstate --help`` imports what ``podstate check`` imports (pyinfra, paramiko, gevent,
    the desired-state schema); the floor's start-up is that of ``ssh -V``.
    """
    commands = {
        "podstate --help": [str(BIN / "podstate"), "--help"],
        "pyinfra --help": [str(BIN / "pyinfra"), "--help"],
        "ansible-playbook --version": [str(BIN / "ansible-playbook"), "--version"],
        "ssh -V": ["ssh", "-V"],
    }
    result = {}
    for name, command in commands.items():
        if not Path(command[0]).exists() and "/" in command[0]:
            continue
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(command, cwd=ROOT, capture_output=True, stdin=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        result[name] = round(statistics.median(times), 3)
    return result


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` as JSON, replacing the old file in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


# --- the report -----------------------------------------------------------------------------


@dataclass
class Cell:
    """One step at one setting, over its runs."""

    median: float
    low: float
    high: float
    runs: int
    commands_max: int  # most remote commands any pod got, in any run
    commands_mean: float
    cpu: float | None  # median CPU seconds of the tool's processes on the control machine


def cells(raw: dict[str, Any]) -> dict[tuple[str, float, int], Cell]:
    """Return every (step, rtt_ms, pods) with its median time and commands per pod."""
    groups: dict[tuple[str, float, int], list[dict[str, Any]]] = {}
    for sample in raw["samples"]:
        for step, result in sample["steps"].items():
            groups.setdefault((step, sample["rtt_ms"], sample["pods"]), []).append(result)
    out = {}
    for key, results in groups.items():
        seconds = [r["seconds"] for r in results]
        out[key] = Cell(
            median=statistics.median(seconds),
            low=min(seconds),
            high=max(seconds),
            runs=len(seconds),
            commands_max=int(max(r["commands"]["max"] for r in results)),
            commands_mean=statistics.fmean(r["commands"]["mean"] for r in results),
            cpu=statistics.median(cpus)
            if (cpus := [r["client_cpu_s"] for r in results if "client_cpu_s" in r])
            else None,
        )
    return out


def slope_ms_per_pod(points: list[tuple[int, float]]) -> float | None:
    """Return the least-squares slope of seconds against pods, in ms per pod."""
    if len(points) < 2:
        return None
    xs, ys = zip(*points, strict=True)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 1000 * sum((x - mx) * (y - my) for x, y in points) / var if var else None


def step_excess(points: list[tuple[int, float]], knee: int) -> tuple[int, float] | None:
    """Return (pods, seconds above the linear trend) for the largest count past ``knee``.

    The trend is the line through the two largest counts at or below ``knee`` (pyinfra's
    default parallelism, where a capped pool would start a second batch); None when the
    counts do not straddle it.
    """
    below = sorted(p for p in points if p[0] <= knee)[-2:]
    above = sorted(p for p in points if p[0] > knee)
    if len(below) < 2 or not above:
        return None
    (x1, y1), (x2, y2) = below
    x, y = above[-1]
    return x, y - (y2 + (y2 - y1) * (x - x2) / (x2 - x1))


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ratio(a: Cell | None, b: Cell | None) -> float | None:
    return a.median / b.median if a and b and b.median else None


def report(raw: dict[str, Any]) -> str:
    """Return the Markdown report of the raw results: tables, targets, machine, notes."""
    settings = raw["settings"]
    rtts = settings["rtts_ms"]
    counts = settings["pod_counts"]
    table = cells(raw)
    m = raw["machine"]
    knee = 20 * int(m["cores"] or 1)  # pyinfra's default PARALLEL: 20 per CPU core

    def cell(step: str, rtt: float, pods: int) -> Cell | None:
        return table.get((step, rtt, pods))

    lines = [
        "# Fleet speed: podstate against raw SSH and Ansible",
        "",
        f"`make bench` (bench/run.py), {raw['started']}; sandbox pods reached through a "
        "latency proxy (bench/latency_proxy.py). Times are medians of "
        f"{settings['runs']} runs (Ansible: {settings['ansible_runs']}), in seconds, from "
        "starting the command to its exit, on fresh SSH connections. Raw samples: "
        "[fleet.json](fleet.json); plot: [fleet.png](fleet.png).",
        "",
        "![time against pods](fleet.png)",
        "",
    ]
    for rtt in rtts:
        title = f"## {rtt:g} ms RTT" + (
            " (no added latency: the local work alone)" if rtt == 0 else ""
        )
        lines += [title, "", "| step | " + " | ".join(f"{n} pods" for n in counts)]
        lines[-1] += f" | {counts[-1]}/{counts[0]} | slope, ms/pod | commands/pod |"
        lines.append("|---" * (len(counts) + 4) + "|")
        for step in STEPS:
            row = [cell(step, rtt, n) for n in counts]
            if not any(row):
                continue
            points = [(n, c.median) for n, c in zip(counts, row, strict=True) if c]
            commands = max((c.commands_max for c in row if c), default=None)
            lines.append(
                f"| {LABELS[step]} | "
                + " | ".join(_fmt(c.median if c else None) for c in row)
                + f" | {_fmt(_ratio(row[-1], row[0]))}"
                + f" | {_fmt(slope_ms_per_pod(points), 1)} | {commands} |"
            )
        for name, top, bottom in (
            ("check / floor", "check", "floor"),
            ("noop / floor", "noop", "floor"),
            ("first apply / floor", "first", "floor"),
            ("ansible / check", "ansible", "check"),
        ):
            ratios = [_ratio(cell(top, rtt, n), cell(bottom, rtt, n)) for n in counts]
            if any(r is not None for r in ratios):
                lines.append(f"| *{name}* | " + " | ".join(_fmt(r) for r in ratios) + " | | | |")
        lines.append("")
    lines += _targets(table, counts, rtts, knee)
    lines += _reading(table, counts, rtts, raw)
    lines += _breakdown(table, counts, rtts, raw.get("startup", {}))
    lines += _machine(raw, knee)
    lines += _notes(raw)
    return "\n".join(lines) + "\n"


def _verdict(ok: bool | None) -> str:
    return {True: "**met**", False: "**missed**", None: "not measured"}[ok]


def _targets(table: dict, counts: list[int], rtts: list[float], knee: int) -> list[str]:
    """Return the Markdown section that says whether each target of the issue is met."""
    rows = []

    def at(step: str, rtt: float, pods: int) -> Cell | None:
        return table.get((step, rtt, pods))

    for name, top, limit in (
        ("check", "check", TARGET_CHECK_FLOOR),
        ("noop apply", "noop", TARGET_NOOP_FLOOR),
    ):
        ratios = {
            n: _ratio(at(top, TARGET_RTT_MS, n), at("floor", TARGET_RTT_MS, n)) for n in TARGET_PODS
        }
        measured = [r for r in ratios.values() if r is not None]
        ok = all(r <= limit for r in measured) if len(measured) == len(TARGET_PODS) else None
        shown = ", ".join(f"{_fmt(r)} at {n} pods" for n, r in ratios.items())
        if ok is False:
            worst = max(measured)
            shown += f" (over by {100 * (worst / limit - 1):.0f} %)"
        rows.append(
            f"| {name} / floor ≤ {limit} at {', '.join(map(str, TARGET_PODS))} pods, "
            f"{TARGET_RTT_MS:g} ms | {shown} | {_verdict(ok)} |"
        )
    ansible_ratios = {
        n: _ratio(at("ansible", TARGET_RTT_MS, n), at("check", TARGET_RTT_MS, n)) for n in counts
    }
    measured = [r for r in ansible_ratios.values() if r is not None]
    ok = all(r >= TARGET_ANSIBLE_CHECK for r in measured) if measured else None
    rows.append(
        f"| ansible / check ≥ {TARGET_ANSIBLE_CHECK:g} ({TARGET_RTT_MS:g} ms) | "
        + ", ".join(f"{_fmt(r)} at {n} pods" for n, r in ansible_ratios.items() if r)
        + f" | {_verdict(ok)} |"
    )
    for name, step, limit in (
        ("check", "check", TARGET_CHECK_COMMANDS),
        ("noop apply", "noop", TARGET_NOOP_COMMANDS),
    ):
        worst = max((c.commands_max for (s, _, _), c in table.items() if s == step), default=None)
        ok = None if worst is None else worst <= limit
        rows.append(
            f"| remote commands per converged pod, {name} ≤ {limit} | at most {worst} "
            f"| {_verdict(ok)} |"
        )
    growth = []
    growth_ok: bool | None = None
    for rtt in (r for r in rtts if r > 0):
        for step in ("check", "noop"):
            points = [(n, at(step, rtt, n).median) for n in counts if at(step, rtt, n)]
            excess = step_excess(points, knee)
            if excess is None:
                continue
            pods, seconds = excess
            floor_points = [(n, at("floor", rtt, n).median) for n in counts if at("floor", rtt, n)]
            floor_excess = step_excess(floor_points, knee)
            linear = seconds <= 2 * rtt / 1000
            growth_ok = linear if growth_ok is None else growth_ok and linear
            growth.append(
                f"{step} {rtt:g} ms: {seconds:+.2f} s at {pods} pods"
                + (f" (floor {floor_excess[1]:+.2f} s)" if floor_excess else "")
            )
    rows.append(
        f"| no faster than linear, no step past pyinfra's default parallelism ({knee} "
        "here): time at the largest count above the line through the two counts below, "
        f"at most 2 RTT | {'; '.join(growth) or '–'} | {_verdict(growth_ok)} |"
    )
    return ["## Targets", "", "| target | measured | verdict |", "|---|---|---|", *rows, ""]


def _reading(table: dict, counts: list[int], rtts: list[float], raw: dict[str, Any]) -> list[str]:
    """Return the section that explains the ratios from the measured parts: start-up, CPU."""
    startup = raw.get("startup", {})
    cores = raw["machine"]["cores"]
    top = max(rtts)
    few, many = counts[0], counts[-1]
    lines = ["## Reading the figures", ""]
    ours = startup.get("podstate --help")
    if ours is not None:
        per_rtt = ", ".join(f"{ours / (r / 1000):.1f} RTT at {r:g} ms" for r in rtts if r > 0)
        few_ratios = ", ".join(
            f"{_fmt(_ratio(table.get(('check', r, few)), table.get(('floor', r, few))))} "
            f"at {r:g} ms"
            for r in rtts
            if r > 0
        )
        lines.append(
            f"- **Fixed cost.** podstate starts in {ours:.2f} s (Python with pyinfra, "
            f"paramiko and gevent imported), `ssh` in {startup.get('ssh -V', 0):.2f} s: "
            f"{per_rtt}. That is why check/floor is highest with few pods and short RTTs "
            f"({few} pods: {few_ratios}), and shrinks as the fleet grows."
        )
    floor_cell, check_cell = table.get(("floor", top, many)), table.get(("check", top, many))
    if floor_cell and check_cell and floor_cell.cpu is not None and check_cell.cpu is not None:
        lines.append(
            f"- **The floor is CPU-bound here from a few dozen pods.** At {many} pods and "
            f"{top:g} ms, the {many} OpenSSH clients used {floor_cell.cpu:.2f} s of CPU "
            f"({1000 * floor_cell.cpu / many:.0f} ms each: process start, post-quantum key "
            f"exchange, signature), podstate's one process {check_cell.cpu:.2f} s for the "
            f"whole check, on {cores} cores that the pods' sshd share. So at 24 and 48 pods "
            "the floor measures this machine's CPU as much as the network, and a ratio near "
            "or below 1 says that paramiko's handshake is cheaper than OpenSSH's, not that "
            "podstate beats the network; with few pods, where the round trips dominate, the "
            "ratios above are the honest comparison."
        )
    ansible_cell = table.get(("ansible", top, many))
    if ansible_cell and check_cell and ansible_cell.cpu is not None:
        bound = ansible_cell.cpu / cores
        lines.append(
            f"- **Ansible, without the shared cores.** At {many} pods and {top:g} ms, "
            f"`ansible-playbook` and its forks alone used {ansible_cell.cpu:.1f} s of CPU on "
            f"the control machine ({ansible_cell.cpu / many:.2f} s per pod; not counting the "
            f"Python it starts on the pods), so even with pods of their own it needs at least "
            f"{bound:.1f} s on {cores} cores: {bound / check_cell.median:.1f} × podstate's "
            f"check ({check_cell.median:.2f} s)."
        )
    first, noop = table.get(("first", top, few)), table.get(("noop", top, few))
    if first and noop and first.commands_max > noop.commands_max:
        extra = first.commands_max - noop.commands_max
        lines.append(
            f"- **A change costs round trips.** A first apply runs up to {first.commands_max} "
            f"remote commands per pod, {extra} more than a noop apply, each in a step of its "
            f"own: at {top:g} ms and {few} pods it takes {first.median - noop.median:.2f} s "
            f"longer ({(first.median - noop.median) / extra / (top / 1000):.1f} RTT per extra "
            "command)."
        )
    return lines + [""]


def _breakdown(
    table: dict, counts: list[int], rtts: list[float], startup: dict[str, float]
) -> list[str]:
    """Return the section that splits each time into local work and sequential round trips.

    At 0 ms the time is local work only (process start, imports, inventory, crypto for
    every pod on this machine's cores); what a run at RTT r adds over it, divided by r,
    is how many round trips the step waits for one after the other.
    """
    if 0.0 not in rtts or not any(r > 0 for r in rtts):
        return []
    lines = [
        "## Where the time goes",
        "",
        "Local work is the time at 0 ms RTT: process start-up, imports, inventory and "
        "desired-state validation, SSH crypto for every pod, and the pods' own work (sshd, "
        "shells, the probe), all on this machine's cores. Round trips are (time at RTT − "
        "time at 0 ms) / RTT: how many network round trips the step waits for one after "
        "the other; a lower bound where local work overlaps the waiting. Process start-up "
        "alone (median of 3, no pod contacted): "
        + ", ".join(f"`{cmd}` {secs:.2f} s" for cmd, secs in startup.items())
        + ".",
        "",
        "| step | "
        + " | ".join(f"local work, {n} pods" for n in counts)
        + " | "
        + " | ".join(f"round trips at {r:g} ms, {n} pods" for r in rtts if r > 0 for n in counts)
        + " | "
        + " | ".join(f"client CPU s, {n} pods" for n in counts)
        + " |",
        "|---" * (1 + len(counts) * (2 + sum(1 for r in rtts if r > 0))) + "|",
    ]
    for step in STEPS:
        base = [table.get((step, 0.0, n)) for n in counts]
        if not any(base):
            continue
        trips = []
        for rtt in (r for r in rtts if r > 0):
            for n, b in zip(counts, base, strict=True):
                c = table.get((step, rtt, n))
                trips.append(_fmt((c.median - b.median) / (rtt / 1000), 1) if c and b else "–")
        top = max(rtts)
        cpus = [table.get((step, top, n)) for n in counts]
        lines.append(
            f"| {LABELS[step]} | "
            + " | ".join(_fmt(b.median if b else None) for b in base)
            + " | "
            + " | ".join(trips)
            + " | "
            + " | ".join(_fmt(c.cpu if c else None) for c in cpus)
            + " |"
        )
    return lines + [
        "",
        f"Client CPU is the CPU time (user + system, at {max(rtts):g} ms) of the tool's own "
        "processes on the control machine: the Python process of podstate and pyinfra, "
        "one `ssh` per pod for the floor, `ansible-playbook` and its forks (not the "
        "ControlPersist masters); the pods' side (sshd, shells, Python for Ansible) runs on "
        "the same cores and is not included.",
        "",
    ]


def _machine(raw: dict[str, Any], knee: int) -> list[str]:
    m, s = raw["machine"], raw["settings"]
    loads = [x["load_before"] for x in raw["samples"]]
    return [
        "## Machine and settings",
        "",
        "| | |",
        "|---|---|",
        f"| CPU | {m['cpu']}, {m['cores']} cores |",
        f"| memory | {m['memory_gib']} GiB |",
        f"| kernel | {m['kernel']} |",
        f"| Python | {m['python']} |",
        f"| pyinfra / paramiko | {m['pyinfra']} / {m['paramiko']} |",
        f"| ansible-core | {m['ansible-core']} |",
        f"| OpenSSH client | {m['openssh']} |",
        f"| RTTs | {', '.join(f'{r:g} ms' for r in s['rtts_ms'])} |",
        f"| pod counts | {', '.join(map(str, s['pod_counts']))} |",
        f"| runs | {s['runs']} (Ansible: {s['ansible_runs']}, at non-zero RTTs) |",
        f"| pyinfra's default parallelism here | {knee} (20 per core; podstate sets its own) |",
        f"| load average before cycles | {min(loads):.1f} to {max(loads):.1f} |"
        if loads
        else "| load average | – |",
        f"| total time | {raw.get('elapsed_s', 0) / 60:.1f} min |",
        "",
    ]


def _notes(raw: dict[str, Any]) -> list[str]:
    return [
        "## Notes",
        "",
        "¹ **Ansible here runs on the same cores as the pods.** Every sandbox pod is a "
        "process tree on this machine, so the Python interpreter Ansible starts on every "
        "pod for every task (16 per pod here, with pipelining), and the worker process it "
        "forks per pod and task on the controller, compete for the same "
        f"{raw['machine']['cores']} cores. That penalizes tools that start Python on every "
        "pod for every task far more than real pods would, whose CPUs are their own; read "
        "the Ansible figures as an upper bound of what Ansible costs against real pods.",
        "",
        "- **Fleet.** Sandbox pods (podstate/sandbox.py): a real sshd per pod in its own "
        "namespaces, shapes cycling through the five of the README. The desired state is "
        "the shipped `inventories/group_vars` without any `venv` key (a venv is built from "
        "the network), plus `host_vars/pod-3.yaml` with `shm: {min_size: 32M}` so that pod-3's "
        "64 MiB /dev/shm is not a violation and every pod converges cleanly.",
        "- **Latency.** bench/latency_proxy.py, one asyncio process for all pods, holds each "
        "chunk RTT/2 in each direction, in order, without a throughput cap, and opens the "
        "upstream connection 1.5 RTT after the client's, so a connection costs what a TCP "
        "handshake costs. It runs at a higher CPU priority than the tools measured, since it "
        "stands for the network.",
        "- **Floor.** `ssh -F /dev/null -o BatchMode=yes -o ControlMaster=no pod true`, one "
        "OpenSSH client per pod, all started at once; the time until the last one exits.",
        "- **Steps.** In each cycle, on fresh pods: first apply, floor, `podstate check`, "
        "noop apply, then Ansible's check (`ansible-playbook --check bench/ansible/fleet.yml`"
        ", forks = pods, pipelining, ControlPersist, no fact gathering; its ControlPersist "
        "masters are closed before it, so it starts from fresh connections too). Before "
        "Ansible's check, the two ~/.bashrc blocks Ansible's `blockinfile` adds next to "
        "podstate's own are written into each pod, so that Ansible too checks a fleet "
        "converged on its own terms; the run asserts its check would change nothing.",
        "- **Commands per pod** are exec requests counted in each pod's sshd log "
        "(`Starting session: command for`), the most any pod got in any run.",
        "- **Ratios** are ratios of medians; slopes are least-squares fits of the medians.",
        "- Other work on the machine during the run (the load averages above) slows every "
        "step alike; the cycles are interleaved so that it spreads over all settings.",
        "",
    ]


def plot(raw: dict[str, Any], path: Path) -> None:
    """Write the PNG: median time against pods, one panel per RTT, min-max error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = cells(raw)
    rtts = [r for r in raw["settings"]["rtts_ms"]]
    counts = raw["settings"]["pod_counts"]
    fig, axes = plt.subplots(1, len(rtts), figsize=(5.2 * len(rtts), 4.4), squeeze=False)
    styles = {
        "floor": ("k", "o", "floor: ssh true"),
        "check": ("tab:blue", "s", "podstate check"),
        "noop": ("tab:green", "^", "noop apply"),
        "first": ("tab:orange", "D", "first apply"),
        "ansible": ("tab:red", "v", "ansible --check"),
    }
    for ax, rtt in zip(axes[0], rtts, strict=True):
        for step, (color, marker, label) in styles.items():
            points = [(n, table[(step, rtt, n)]) for n in counts if (step, rtt, n) in table]
            if not points:
                continue
            xs = [n for n, _ in points]
            ys = [c.median for _, c in points]
            err = [[c.median - c.low for _, c in points], [c.high - c.median for _, c in points]]
            ax.errorbar(xs, ys, yerr=err, color=color, marker=marker, label=label, capsize=3)
        ax.set_yscale("log")
        ax.set_xticks(counts)
        ax.set_xlabel("pods")
        ax.set_ylabel("seconds (median; bars: min–max)")
        ax.set_title(f"{rtt:g} ms RTT" if rtt else "0 ms RTT (local work only)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize="small")
    m = raw["machine"]
    fig.suptitle(f"podstate fleet benchmark — {m['cores']} cores, {m['cpu']}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(raw: dict[str, Any], out: Path) -> None:
    """Write fleet.md and fleet.png under ``out`` from the raw results."""
    (out / "fleet.md").write_text(report(raw))
    plot(raw, out / "fleet.png")


def _numbers(text: str, kind: type) -> list:
    try:
        return [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or only rebuild the report); return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rtt", type=lambda t: _numbers(t, float), default=Settings().rtts_ms,
        help="round-trip times in ms, comma-separated; 0 measures local work alone "
        "(default 150,50,0)",
    )  # fmt: skip
    parser.add_argument(
        "--pods", type=lambda t: _numbers(t, int), default=Settings().pod_counts,
        help="pod counts, comma-separated (default 8,24,48)",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=Settings().runs, help="runs (default 3)")
    parser.add_argument(
        "--ansible-runs", type=int, default=1,
        help="runs that include Ansible (default 1: it takes minutes at 48 pods)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument(
        "--report", action="store_true", help="only rebuild fleet.md and fleet.png from fleet.json"
    )
    args = parser.parse_args(argv)
    try:
        if args.report:
            raw = json.loads((args.out / "fleet.json").read_text())
        else:
            if os.geteuid() != 0:
                raise BenchError("the benchmark needs root (sandbox pods); run it as root")
            if args.ansible_runs and not (BIN / "ansible-playbook").exists():
                raise BenchError("ansible-playbook missing: pip install -e '.[bench]'")
            if args.runs < 1 or any(n < 1 for n in args.pods) or any(r < 0 for r in args.rtt):
                raise BenchError("runs and pod counts must be positive, RTTs not negative")
            settings = Settings(rtts_ms=args.rtt, pod_counts=sorted(args.pods), runs=args.runs)
            raw = measure(settings, min(args.ansible_runs, args.runs), args.out)
        write_report(raw, args.out)
    except (BenchError, OSError, subprocess.SubprocessError) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'fleet.md'} and {args.out / 'fleet.png'}")
    return 0
