"""The same-work floor: podstate's own remote commands, replayed with plain OpenSSH.

podstate runs with ``bench/record`` on its PYTHONPATH (``recording``): every remote command
it sends is written down with its stdin and exit status (``bench/record/sitecustomize.py``).
``replay`` then sends exactly those commands, each pod's in its order, with plain OpenSSH:
one multiplexed connection per pod (ControlMaster), every pod at once. What is left between
podstate and this floor is podstate's own process, not the work its commands do on the pods.

The replay must do the same work, so each command must end as it did for podstate (its exit
status), and the cycle checks the pods afterwards (a check is clean). Two things are changed:
the pod lock's count that podstate's probe read (``seen``), which a take refuses once another
run has taken the lock since; podstate's own run has, so the replay's take does not compare
it (it reads the same files). And the container start the ready marker names: the first
apply is replayed on pods restarted since podstate's, and a marker of another start is not
ready, so it names the start the pod has now, read before the replay is timed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.common.steps import ROOT, STEP_TIMEOUT_S, BenchError, Meter, ssh_base
from podstate.facts import start as container_start
from podstate.paths import READY_MARKER

RECORDER = ROOT / "bench" / "record"
# The lock's arguments before ``seen`` (scripts/lock.sh: MODE TTL WAIT GRACE END SEEN).
_SEEN = re.compile(r"( take \d+ \d+ \d+ (?:release|keep) )(\S+) ")
# The ready marker's write (bookkeeping.write_command): its mode, sha256 and content, which
# is base64 or, quoted (once, or again inside a fold's step), "=" and the JSON itself.
_MARKER = re.compile(
    rf"(set -- {re.escape(READY_MARKER)} (?:own|last) \d+ )([0-9a-f]{{64}}) "
    r"""(?:([A-Za-z0-9+/=]+)|('(?:"'"')?=)(\{[^'\n]*\}\n))"""
)


@dataclass(frozen=True)
class Recorded:
    """One remote command as podstate sent it."""

    command: str
    stdin: bytes
    status: int | None  # None: podstate never read it


def recording(env: dict[str, str], directory: Path) -> dict[str, str]:
    """Return ``env`` for a podstate command whose remote commands are written to
    ``directory`` (made empty first)."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.jsonl"):
        old.unlink()
    path = env.get("PYTHONPATH")
    return {
        **env,
        "PYTHONPATH": f"{RECORDER}:{path}" if path else str(RECORDER),
        "PODSTATE_BENCH_RECORD": str(directory),
    }


def recorded(directory: Path) -> dict[int, list[Recorded]]:
    """Return the commands written to ``directory``, by the port of the pod they went to, in
    the order they were sent. Raises BenchError for what a replay cannot repeat (SFTP)."""
    by_port: dict[int, list[tuple[int, Recorded]]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            item = json.loads(line)
            if "command" not in item:
                raise BenchError(f"replay: podstate used the {item['subsystem']} subsystem")
            one = Recorded(item["command"], base64.b64decode(item["stdin"]), item["status"])
            by_port.setdefault(item["port"], []).append((item["order"], one))
    if not by_port:
        raise BenchError(f"replay: nothing was recorded in {directory}")
    return {
        port: [r for _, r in sorted(items, key=lambda x: x[0])] for port, items in by_port.items()
    }


def _text(data: bytes) -> str:
    """Return ``data`` as text, any byte that is not UTF-8 kept (as podstate encodes it)."""
    return data.decode("utf-8", "surrogateescape")


def unseen(command: str) -> str:
    """Return ``command`` with the pod lock's ``seen`` made empty (see the module docstring):
    ``""`` is an empty word inside podstate's single-quoted ``sh -c`` too."""
    return _SEEN.sub(r'\1"" ', command, count=1)


def restarted(command: str, container: str | None) -> str:
    """Return ``command`` with the ready marker it writes naming the container start
    ``container`` (see the module docstring), its sum to match."""

    def swap(found: re.Match[str]) -> str:
        fields = json.loads(base64.b64decode(found[3]) if found[3] else found[5])
        text = (json.dumps({**fields, "container": container}) + "\n").encode()
        word = base64.b64encode(text).decode() if found[3] else found[4] + text.decode()
        return f"{found[1]}{hashlib.sha256(text).hexdigest()} {word}"

    return _MARKER.sub(swap, command)


def replay(
    commands: dict[int, list[Recorded]], pods_file: Path, state: Path, work: Path
) -> dict[str, Any]:
    """Return the time to send every pod its recorded commands with OpenSSH, every pod at
    once, each pod's one after the other over one connection. Raises BenchError when one ends
    otherwise than it did for podstate."""
    doc = yaml.safe_load(pods_file.read_text())
    base = ssh_base(doc)
    hosts = {int(p["ssh_port"]): p["ssh_hostname"] for p in doc["pods"].values()}
    control = work / "replay-cm"
    control.mkdir(exist_ok=True)

    def target(port: int) -> list[str]:
        return [
            *base, "-o", "ControlMaster=auto", "-o", f"ControlPath={control}/{port}",
            "-o", "ControlPersist=yes", "-p", str(port), f"root@{hosts[port]}",
        ]  # fmt: skip

    def container(port: int) -> str | None:
        texts = [text for item in commands[port] for text in (item.command, _text(item.stdin))]
        if not any(_MARKER.search(text) for text in texts):
            return None
        read = subprocess.run(
            [*base, "-p", str(port), f"root@{hosts[port]}", container_start.PROBE_LINE],
            capture_output=True, text=True, timeout=STEP_TIMEOUT_S,
        )  # fmt: skip
        return container_start.parse(read.stdout.strip().removeprefix("cstart "))

    def one(port: int) -> str | None:
        for i, item in enumerate(commands[port]):
            command, stdin = unseen(item.command), item.stdin
            if port in starts:  # the marker's write: on the command line, or a fold's stdin
                command = restarted(command, starts[port])
                stdin = restarted(_text(stdin), starts[port]).encode("utf-8", "surrogateescape")
            result = subprocess.run(
                [*target(port), command], input=stdin, capture_output=True,
                timeout=STEP_TIMEOUT_S,
            )  # fmt: skip
            if item.status is not None and result.returncode != item.status:
                return (
                    f"port {port}, command {i + 1}: exit {result.returncode}, podstate's "
                    f"{item.status}: {result.stderr.decode(errors='replace').strip()[-500:]}"
                )
        return None

    missing = set(commands) - set(hosts)
    if missing:
        raise BenchError(f"replay: no pod on port {sorted(missing)[0]}")
    starts = {port: found for port in commands if (found := container(port)) is not None}
    meter = Meter(state)
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        failures = [f for f in pool.map(one, sorted(commands)) if f]
    step = meter.stop()
    step["client_cpu_s"] += _close_masters([target(port) for port in commands])
    if failures:
        raise BenchError(f"replay: {len(failures)} pod(s) did other work: {failures[0]}")
    return step


def _close_masters(targets: list[list[str]]) -> float:
    """Exit each pod's ControlMaster; return the CPU seconds they used (they are no children
    of this process once they detach)."""
    used = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for command in targets:
        check = subprocess.run([*command[:-1], "-O", "check", command[-1]], capture_output=True,
                               text=True)  # fmt: skip
        pid = re.search(r"pid=(\d+)", check.stderr)
        if pid:
            try:
                fields = Path(f"/proc/{pid[1]}/stat").read_text().rsplit(")", 1)[1].split()
                used += (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                pass
        subprocess.run([*command[:-1], "-O", "exit", command[-1]], capture_output=True)
    return used
