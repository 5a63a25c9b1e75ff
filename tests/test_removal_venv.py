"""A venv that a process runs from is not removed: when it leaves the desired state, or at
``podstate uninstall``, the probe looks for the processes running from it (their command
line, working directory, open and mapped files; one podstate cannot read may), a violation
names them, and the venv stays, still recorded, until they stop. pod-1 is unprivileged:
its root has no CAP_SYS_PTRACE, so it cannot read another user's process."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from podstate.check.uninstall import DEPLOY
from podstate.facts import made
from podstate.facts.made import Busy
from podstate.operations.removal import venv_command
from podstate.shell import b64
from tests.e2e import BIN, apply, check, run, write_vars
from tests.fixtures.venv.wheels import tar_bytes, wheelhouse
from tests.typed_state import state

SANDBOX = {"pods": 1}
POD = "pod-1"
VENV = "/opt/busy-venv"
MOTD = "/etc/busy-venv-motd"
BASE = {"shm": {"min_size": "32M"}, "files": {MOTD: {"content": "podstate's\n"}}}
SPEC = {"path": VENV, "packages": ["tinyapp"], "find_links": ["/workspace/wheels"],
        "no_index": True}  # fmt: skip
# A process of the system's python that maps a file of the venv, as one that loaded a
# library of its site-packages has: only its maps name the venv.
MAPS = (
    "python3 -c 'import mmap, sys, time; f = open(sys.argv[1]);"
    " m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); f.close(); time.sleep(3600)'"
    f" {VENV}/lib/python3*/site-packages/tinyapp/__init__.py"
)


# --- unit tests ---------------------------------------------------------------------------


def test_the_busy_lines_name_each_process_and_those_podstate_cannot_read():
    found = made.parse(
        [
            "made.busy =/opt/venv 12 =python",
            f"made.busy =/opt/venv 13 {b64('my job')} unread",
            "made.busy =/scratch 14 =sleep",
        ]
    )
    assert found.busy == {
        "/opt/venv": (
            Busy(pid=12, command="python", unread=False),
            Busy(pid=13, command="my job", unread=True),
        ),
        "/scratch": (Busy(pid=14, command="sleep", unread=False),),
    }


def test_the_processes_are_named_those_podstate_cannot_read_apart():
    busy = made.parse(["made.busy =/v 12 =python", "made.busy =/v 13 =job unread"]).busy["/v"]
    assert made.using(busy, "runs from") == (
        "python (pid 12) still runs from it; podstate cannot read what job (pid 13) runs from"
        " (another user's: root has no CAP_SYS_PTRACE here)"
    )
    assert made.using(busy[:1] * 2, "uses") == "python (pid 12), python (pid 12) still use it"


def test_a_declared_venv_is_kept_so_the_probe_does_not_look_for_its_processes():
    wanted = state({"venv": {"path": VENV}, "scratch": {"/scratch": {"size": "1G"}}})
    assert set(made.request(wanted).keep) == {VENV, "/scratch"}
    assert made.request(state({})).keep == ()


# --- end to end ---------------------------------------------------------------------------


def _entry(fleet, tmp_path: Path) -> dict:
    out = tmp_path / "r.json"
    result = check(fleet, "--limit", POD, "--json", str(out))
    assert out.exists(), result.stderr
    return json.loads(out.read_text())["pods"][POD]


def _build(fleet, tmp_path: Path) -> str:
    """Build the venv on the pod; return the directory its link names."""
    house = base64.b64encode(tar_bytes(wheelhouse(tmp_path / "wheels"))).decode()
    fleet.out(POD, f"mkdir -p /workspace/wheels && echo {house} | base64 -d | "
                   "tar -xzf - -C /workspace/wheels")  # fmt: skip
    fleet.group_vars("all", {**BASE, "venv": SPEC})
    assert apply(fleet, "--limit", POD).returncode == 0
    return fleet.out(POD, f"readlink {VENV}").strip()


def _start(fleet, command: str, ready: str) -> str:
    """Start ``command`` on the pod, detached; return its pid once ``ready`` (sh, with $p the
    pid, no single quote) holds."""
    pid = fleet.out(POD, f"setsid {command} </dev/null >/dev/null 2>&1 & echo $!").strip()
    fleet.out(POD, f"p={pid} timeout 60 sh -c 'until {ready}; do sleep 0.05; done'")
    return pid


def _runs(pid: str, program: str) -> str:
    """Return sh that is true when process ``pid`` runs ``program`` (its first word)."""
    return f'[ "$(tr "\\0" "\\n" </proc/{pid}/cmdline | head -n 1)" = {program} ]'


def _stop(fleet, pids: list[str]) -> None:
    for pid in pids:
        fleet.out(POD, f"kill {pid}; while kill -0 {pid} 2>/dev/null; do sleep 0.1; done")


def _there(fleet) -> str:
    return fleet.out(POD, f"readlink {VENV} || echo gone").strip()


def _busy(entry: dict) -> str:
    assert entry["status"] == "violation", entry
    [busy] = [v for v in entry["violations"] if v["id"] == "removal.busy"]
    return busy["message"]


def _uninstall(fleet):
    return run(fleet, [str(BIN / "podstate"), "uninstall", "--limit", POD])


def test_a_venv_a_process_runs_from_stays_and_names_it_then_goes(fleet, tmp_path):
    built = _build(fleet, tmp_path)
    pids = []
    try:
        program = f"{VENV}/bin/python -c 'import tinyapp, time; time.sleep(3600)'"
        pids.append(_start(fleet, program, _runs("$p", f"{VENV}/bin/python")))
        running = pids[-1]
        # its executable is the system's interpreter the venv's python links to
        assert fleet.out(POD, f"readlink /proc/{running}/exe").startswith("/usr/bin/python3")
        pids.append(_start(fleet, MAPS, f"grep -q /opt/{built}/ /proc/$p/maps"))
        mapped = pids[-1]
        nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups sleep 3600"
        pids.append(_start(fleet, nobody, _runs("$p", "sleep")))
        unread = pids[-1]

        fleet.group_vars("all", BASE)
        message = _busy(_entry(fleet, tmp_path))
        assert f"the venv {VENV} is no longer declared" in message
        assert f"python (pid {running}), python3 (pid {mapped}) still run from it" in message
        assert f"podstate cannot read what sleep (pid {unread}) runs from" in message
        result = apply(fleet, "--limit", POD)
        assert result.returncode == 1 and "removal.busy" in result.stderr
        assert _there(fleet) == built
        assert VENV in fleet.out(POD, f"cat {made.MADE}")  # the record still names it

        _stop(fleet, [unread])
        pids.remove(unread)
        message = _busy(_entry(fleet, tmp_path))
        assert "cannot read" not in message and f"python (pid {running})" in message
    finally:
        _stop(fleet, pids)
    changes = [c["operation"] for c in _entry(fleet, tmp_path)["changes"]]
    assert f"would remove: the venv {VENV}" in changes
    assert apply(fleet, "--limit", POD).returncode == 0
    assert _there(fleet) == "gone"
    assert fleet.ssh(POD, f"test -e /opt/{built}").returncode == 1
    assert _entry(fleet, tmp_path)["status"] == "ok"


def _uninstall_deploy(fleet, tmp_path: Path):
    """Apply the deploy ``podstate uninstall`` applies once its plan found something to
    remove, as it would for a process started after that plan."""
    nothing = tmp_path / "nothing"
    write_vars(nothing, "group_vars/all.yaml", {})
    env = {**fleet.env(), "PODSTATE_VARS": str(nothing), "PODSTATE_UNINSTALL_VOLUME": "/workspace"}
    deploy = [str(BIN / "pyinfra"), "-y", "--limit", POD, "inventories/pods.py", DEPLOY]
    return run(fleet, deploy, env=env)


def test_uninstall_leaves_a_venv_a_process_runs_from_until_it_stops(fleet, tmp_path):
    built = _build(fleet, tmp_path)
    cwd = f"cd /opt/{built}/lib && exec sleep 3600"  # its working directory is in the venv
    pid = _start(fleet, f"sh -c '{cwd}'", _runs("$p", "sleep"))
    try:
        result = _uninstall(fleet)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"sleep (pid {pid}) still runs from it" in result.stdout
        assert _there(fleet) == built
        assert fleet.ssh(POD, f"test -e {MOTD}").returncode == 1  # the rest went all the same
        # applied all the same, the record still names the venv
        result = _uninstall_deploy(fleet, tmp_path)
        assert result.returncode == 1 and "removal.busy" in result.stderr, result.stderr
        assert _there(fleet) == built
        assert VENV in fleet.out(POD, f"cat {made.MADE}")
    finally:
        _stop(fleet, [pid])
    result = _uninstall(fleet)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _there(fleet) == "gone"
    assert fleet.ssh(POD, f"test -e {made.MADE}").returncode == 1


def test_the_removal_looks_again_and_leaves_a_venv_a_process_started_since(fleet):
    versioned = "/opt/again/.venv-0123456789ab"
    link = "/opt/again/venv"
    fleet.out(POD, f"mkdir -p {versioned}/lib && ln -sfn {versioned} {link}")
    # started after the plan: only the removal's own look finds it
    pid = _start(fleet, f"sh -c 'cd {versioned}/lib && exec sleep 3600'", _runs("$p", "sleep"))
    try:
        result = fleet.ssh(POD, venv_command(link))
        assert result.returncode == 1
        assert f"{link}: in use now by sleep (pid {pid}): left as it is" in result.stderr
        assert fleet.ssh(POD, f"test -L {link} && test -d {versioned}/lib").returncode == 0
    finally:
        _stop(fleet, [pid])
    result = fleet.ssh(POD, venv_command(link))
    assert result.returncode == 0, result.stderr
    assert fleet.ssh(POD, f"test -e {link} || test -e {versioned}").returncode == 1
