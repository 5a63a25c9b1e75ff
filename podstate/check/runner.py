"""``podstate check``: plan the deploy on every pod without changing anything, and report.

pyinfra's ``--dry`` exits 0 with changes pending and its JSON plan leaves out pods that
failed, so the check drives pyinfra's API itself: connect, plan (which runs only the
read-only probe on each pod), then classify every pod as ok, drift, restarted, busy
(another run held the pod lock: it was changing the pod), violation, unreachable or error,
and say what the run did with each pod's host key. The verdicts are
``podstate.check.result``'s model; the reports written from them are in
``podstate.check.reports`` and ``podstate.check.markdown``.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyinfra import logger as pyinfra_logger
from pyinfra.api import BaseStateCallback, Host, Inventory, State
from pyinfra.api.exceptions import PyinfraError

from podstate import settings
from podstate.check.result import PodResult
from podstate.check.shards import Shard
from podstate.inventory import fleet, hostkeys
from podstate.pyinfra_api import cli as pyinfra_cli
from podstate.pyinfra_api import connect as pyinfra_connect
from podstate.pyinfra_api import logs
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import findings, lock, login

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Told of each pod's stage as the run goes: connecting, planning, checked (podstate.progress).
Progress = Callable[[str, str], None]


class CheckFailed(Exception):
    """The check could not run at all (bad inventory or deploy file): one line."""


_NONE_LEFT = "PyinfraError: No hosts remaining!"  # what pyinfra raises as it fails the last pod


class _Errors(BaseStateCallback, logging.Handler):
    """Collects connection errors and pyinfra's per-pod error lines, by pod name, and tells
    ``progress`` (``run``'s) of each pod that connected or could not."""

    def __init__(self, progress: Progress) -> None:
        logging.Handler.__init__(self, logging.WARNING)
        self.unreachable: dict[str, str] = {}
        self.errors: dict[str, list[str]] = {}
        self.progress = progress

    # pyinfra's API: declared static, called on the instance
    def host_connect(self, state: State, host: Host) -> None:  # type: ignore[override]
        self.progress(host.name, "planning")

    def host_connect_error(  # type: ignore[override]
        self, state: State, host: Host, error: Exception
    ) -> None:
        self.unreachable[host.name] = _ANSI.sub("", str(error.args[0] if error.args else error))
        self.progress(host.name, "checked")

    def emit(self, record: logging.LogRecord) -> None:
        line = logs.pod_line(record.getMessage())
        if line and not line[1].startswith("Error (ignored):"):  # not why a pod failed
            self.errors.setdefault(line[0], []).append(line[1])


def deploy_files(directory: str = "deploy") -> list[str]:
    """Return the deploy files ``pyinfra ... deploy/*.py`` runs: every .py file, in name order."""
    return sorted(str(path) for path in Path(directory).glob("*.py"))


def _where(error: BaseException, deploy: str) -> str:
    """Return ``error`` as one line naming the deploy file and the line it came from."""
    line = None
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        if frame.f_code.co_filename == deploy:
            line = lineno
    at = f"{deploy}, line {line}" if line else deploy
    text = _ANSI.sub("", str(error)).strip().replace("\n", " ") or repr(error)
    return f"{at}: {type(error).__name__}: {text}"


def _load_deploys(
    state: State, deploys: list[str], failures: dict[str, str], progress: Progress
) -> None:
    """Plan every deploy file on every active pod, in order, each pod in parallel; an
    exception fails only the pod it happened on, with one line naming the file and line."""

    def failed(host: Host, deploy: str, error: BaseException) -> None:
        failures[host.name] = _where(error, deploy)

    pyinfra_cli.load_deploy_files(
        state, deploys, failed, planned=lambda host: progress(host.name, "checked")
    )
    try:  # the run's order, once: pyinfra refuses to run operations whose order has a cycle
        pyinfra_plan.run_order(state)
    except PyinfraError as e:
        for host in state.inventory.get_active_hosts():
            failures.setdefault(host.name, _where(e, "the deploy files"))


def _limit(inventory: Inventory, patterns: list[str]) -> list[Host] | None:
    """Return the pods ``--limit`` names, as pyinfra's own ``--limit`` chooses them, so one
    list of limits means the same pods to ``podstate check`` and to an apply: each pattern
    is a group's name (its pods) or else a glob of pod names, a comma being part of it.
    None (every pod) without a pattern; CheckFailed, one line, when any pattern matches no
    pod: a check of fewer pods than it was told to check must not pass."""
    if not patterns:
        return None
    chosen = set()
    unmatched = []
    for pattern in patterns:
        group = inventory.get_group(pattern, None)
        if group is None:
            group = [host for host in inventory if fnmatch.fnmatch(host.name, pattern)]
        chosen.update(group)
        unmatched += [] if group else [pattern]
    if unmatched:
        limits = " ".join(f"--limit {p}" for p in unmatched)
        comma = ": a comma is part of a name, as in pyinfra; repeat --limit for each pod"
        raise CheckFailed(f"{limits} matches no pod{comma if ',' in limits else ''}")
    return [host for host in inventory if host in chosen]


def run(
    inventory_file: str,
    deploys: list[str],
    limit: list[str],
    timeout: int = settings.CONNECT_TIMEOUT,
    shard: Shard | None = None,
    strict_host_keys: bool | None = None,
    progress: Progress = lambda name, stage: None,
) -> dict[str, PodResult]:
    """Return the verdict for every pod of the inventory (after ``--limit``, then of those
    the ones in ``shard``), planning the deploy files in the
    order given, as ``pyinfra`` runs them. An empty shard is no pod and no connection.
    ``strict_host_keys`` (``--strict-host-keys``) refuses the keys of API pods seen for the
    first time; None leaves it to ``PODSTATE_STRICT_HOST_KEYS`` (``fleet.strict_host_keys``).
    ``progress`` is told each pod's stage as the run goes, for a display of it."""
    if not deploys:
        raise CheckFailed("no deploy files to plan (run from the repository root)")
    for path, what in [(inventory_file, "inventory"), *((d, "deploy file") for d in deploys)]:
        if not os.path.isfile(path):
            raise CheckFailed(f"no {what} at {path} (run from the repository root)")
    lock.probe_wait = 0  # a check reads each pod as it is: one another run holds is busy
    login.may_fix = False  # and writes nothing, not even ~/.no_auto_tmux
    pyinfra_connect.quiet()  # every pod that cannot be reached: one line, no traceback
    state, config = pyinfra_cli.new_state(timeout)
    errors = _Errors(progress)
    pyinfra_logger.addHandler(errors)
    try:
        try:
            with fleet.strict_host_keys(strict_host_keys):
                inventory = pyinfra_cli.load_inventory(inventory_file)
        except SystemExit as e:
            raise CheckFailed(str(e.code).removeprefix("podstate: ")) from None
        hosts = _limit(inventory, limit)
        if shard is not None:
            hosts = [h for h in (inventory if hosts is None else hosts) if shard.holds(h.name)]
            if not hosts:
                return {}
        config.PARALLEL = min(settings.PARALLEL, len(hosts or inventory) or 1)
        for host in hosts or inventory:
            progress(host.name, "connecting")
        pyinfra_cli.connect(state, inventory, config, hosts, errors)  # unreachable: below
        failures: dict[str, str] = {}
        _load_deploys(state, deploys, failures, progress)
        results = {
            h.name: _verdict(state, h, errors, failures, deploys) for h in hosts or inventory
        }
        for host in hosts or inventory:
            _host_key(results[host.name], host)
            results[host.name].cost_per_hour = host.data.get("cost_per_hour")
        pyinfra_cli.disconnect(state)
        return results
    finally:
        pyinfra_logger.removeHandler(errors)


def _verdict(
    state: State, host: Host, errors: _Errors, failures: dict[str, str], deploys: list[str]
) -> PodResult:
    result = PodResult()
    if host.name in errors.unreachable or not host.connected:
        result.status = "unreachable"
        result.error = errors.unreachable.get(host.name, "could not connect")
        return result
    if host.name in failures or pyinfra_cli.failed(state, host):
        result.status = "error"
        logged = "; ".join(errors.errors.get(host.name, []))
        failure = failures.get(host.name) or ""
        if failure.endswith(_NONE_LEFT) and logged:  # failing the last pod raises this
            failure = ""
        result.error = failure or logged or "the probe failed"
        return result
    found = findings.of(host)
    sorted_ = findings.waived(host)
    result.violations = [
        {"role": v.role, "id": v.finding, "message": v.message} for v in sorted_.failing
    ]
    result.waived = [
        {
            "role": v.role,
            "id": v.finding,
            "message": v.message,
            "reason": w.reason,
            "until": w.until.isoformat(),
        }
        for v, w in sorted_.waived
    ]
    result.stale_waivers = sorted_.stale
    result.checked = list(found.roles)
    with pyinfra_cli.current_host(host):
        for op_hash in pyinfra_plan.host_order(state, host):
            if op_hash in found.bookkeeping:
                continue
            if op_hash not in found.ops:
                deploy = deploys[pyinfra_plan.file_number(state, op_hash)]
                result.checked += [] if deploy in result.checked else [deploy]
            if not pyinfra_plan.will_change(state, host, op_hash):
                continue
            result.changes.append(_change(state, found, op_hash, deploys))
    result.restarted, result.ready, result.boot = found.restarted, found.ready, found.boot
    if found.activity is not None:
        result.idle, result.activity = found.activity["idle"], found.activity
    if found.busy is not None:  # what was read may be halfway through that run's changes
        result.status, result.holder = "busy", found.busy
        result.changes, result.violations = [], []
    elif result.violations:
        result.status = "violation"
    elif result.changes:
        result.status = "restarted" if result.restarted else "drift"
    return result


def _change(
    state: State, found: findings.Findings, op_hash: str, deploys: list[str]
) -> dict[str, Any]:
    """Return one pending change: the role of one of podstate's own operations, or else the
    deploy file of a team's own; the operation as pyinfra names it, or
    what it would change on this pod in words; the file's diff, unless it is a secret."""
    number = pyinfra_plan.file_number(state, op_hash)
    deploy = deploys[number] if 0 <= number < len(deploys) else ""
    role = found.ops.get(op_hash) or deploy
    name = pyinfra_plan.op_name(state, op_hash)
    operation = found.labels.get(op_hash) or name.removeprefix(f"{role} | ")
    change: dict[str, Any] = {"role": role, "operation": operation, "file": deploy}
    if op_hash in found.secret:
        change["secret"] = True  # it uploads a secret: no diff, in any report
    elif op_hash in found.diffs:
        change["diff"] = found.diffs[op_hash]
    return change


def _host_key(result: PodResult, host: Host) -> None:
    """Add to ``result`` what the run did with the pod's host key; a refused key makes the
    pod's error say why, in podstate's words rather than paramiko's."""
    result.host_key = hostkeys.outcome(host.data, host.connected, result.error)
    if result.host_key and result.host_key["trust"] == hostkeys.REFUSED:
        result.status = "unreachable"
        result.error = f"host key refused: {result.host_key['reason']}"
    elif result.host_key is None and "does not match" in (result.error or ""):
        # A pods file: nothing vouches for a restart, so a changed key stays refused.
        where = host.data.get("ssh_hostname") or host.name
        port = int(host.data.get("ssh_port") or 22)
        name = where if port == 22 else f"[{where}]:{port}"
        known = host.data.get("ssh_known_hosts_file") or "~/.ssh/known_hosts"
        result.error = (
            "host key refused: it changed since it was recorded. A restart explains that "
            "(RunPod makes new host keys at every container start), and so would an "
            "interception; if this pod restarted, remove its old key with "
            f"ssh-keygen -f {known} -R '{name}' and run again (or use the RunPod "
            "API inventory, whose startedAt vouches for a restart)"
        )
