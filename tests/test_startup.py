"""Start-up: what ``podstate check`` and ``pyinfra inventories/pods.py deploy/*.py`` load
before their first connection, and how often they read the installed packages' metadata.

Nothing here is timed (bench/startup.py times it): each test runs a fresh interpreter up to
the first connection it attempts (an audit hook stops it there) and reads ``sys.modules``
and the metadata readings made on the way, so the start-up stays as short as it was made.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import BIN, ROOT

# Run before the command: count the readings of the installed packages' metadata (each
# full reading lists every distribution; a named one looks up one), and at the first TCP
# connection print the modules loaded and the readings, and exit.
PROBE = """
import json, os, sys
from importlib import metadata

scans, named = [], []
discover = metadata.Distribution.discover.__func__

def counted(cls, **select):
    if select.get("name") is None:
        scans.append(1)
    else:
        named.append(select["name"])
    return discover(cls, **select)

metadata.Distribution.discover = classmethod(counted)

def hook(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple):
        loaded = sorted(m for m in sys.modules if sys.modules[m] is not None)
        print(json.dumps({"modules": loaded, "scans": len(scans), "named": named}))
        sys.stdout.flush()
        os._exit(0)

sys.addaudithook(hook)
"""

# Modules the check does not use before its first connection; each was loaded then once.
LAZY = [
    "podstate.watch.loop",  # the watch: only ``podstate watch`` and --watch-state
    "podstate.watch.state",
    "podstate.sandbox",  # only ``podstate sandbox``
    "podstate.commands.watch",
    "podstate.commands.sandbox",
    "podstate.commands.inventory",
    "podstate.check.markdown",  # the reports: written after the check
    "podstate.check.reports",
    "podstate.check.merge",  # only ``podstate report merge``
    "podstate.check.wait",
    "podstate.check.uninstall",
    "podstate.inventory.runpod",  # a provider's API client: only when its API is read
    "podstate.inventory.vast",
    "podstate.inventory.api_http",
    "podstate.pod.bookends",  # the deploy files: planned after connecting
]


# The two ways a run starts: podstate's check, and pyinfra with podstate's inventory.
BOTH_COMMANDS = pytest.mark.parametrize(
    "argv",
    [
        [str(BIN / "podstate"), "check"],
        [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"],
    ],
    ids=["podstate check", "pyinfra"],
)


def _until_connect(tmp_path: Path, argv: list[str], cwd: Path = ROOT) -> dict:
    """Return what ``argv`` (a console script of the venv and its arguments) loaded and
    read until its first connection, to a pod of a pods file of its own."""
    pods = tmp_path / "pods.yaml"
    pods.write_text("pods:\n  startup-1:\n    ssh_hostname: 127.0.0.1\n    ssh_port: 9\n")
    program = PROBE + (
        "import runpy\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    env = {
        "PATH": str(BIN) + ":/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PODSTATE_PODS": str(pods),
    }
    done = subprocess.run(
        [sys.executable, "-c", program, *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _python(program: str) -> subprocess.CompletedProcess:
    """Return ``program`` run by a fresh interpreter from the repository root."""
    return subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@BOTH_COMMANDS
def test_nothing_is_loaded_before_the_first_connection_that_it_does_not_use(tmp_path, argv):
    seen = _until_connect(tmp_path, argv)
    loaded = set(seen["modules"])
    assert "podstate.inventory.fleet" in loaded  # the inventory was read: this is the point
    assert sorted(loaded & set(LAZY)) == []


@BOTH_COMMANDS
def test_a_desired_state_validated_before_starts_without_jsonschema(tmp_path, argv):
    """The first run validates the vars files' state with jsonschema (about 50 ms to import
    here); a later run of the same state finds it passed (podstate.desired.passed)."""
    assert "jsonschema" in _until_connect(tmp_path, argv)["modules"]
    assert "jsonschema" not in _until_connect(tmp_path, argv)["modules"]


def test_the_check_reads_the_installed_packages_once_before_connecting(tmp_path):
    """pyinfra asks for the installed packages' entry points at each inventory it makes and
    gevent for each of its plugin groups, typeguard as pyinfra imports it: one reading
    answers them all. podstate looks up no version (``--version`` alone needs one): those
    looked up are the third parties' own, each once, as they are imported."""
    seen = _until_connect(tmp_path, [str(BIN / "podstate"), "check"])
    assert seen["scans"] == 1
    assert "podstate" not in seen["named"]
    assert len(seen["named"]) == len(set(seen["named"])), seen["named"]


def test_importing_podstate_reads_no_package_metadata():
    """Importing what a command imports, and making its parser, reads no installed
    package's metadata: no listing of them all, no version looked up. (pyinfra, imported
    first, reads some as it is imported: its own version, typeguard's plugins.)"""
    program = PROBE + (
        "import pyinfra.api, pyinfra.connectors.ssh\n"
        "scans.clear(); named.clear()\n"
        "import podstate.__main__, podstate.cli, podstate.commands.check\n"
        "import podstate.inventory.fleet, podstate.check.runner, podstate.pyinfra_api.verify\n"
        "podstate.cli.parser()\n"
        "print(json.dumps({'scans': len(scans), 'named': named}))\n"
    )
    done = _python(program)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"scans": 0, "named": []}


def test_the_check_starts_without_what_paramiko_imports_for_match_exec_alone(tmp_path):
    """paramiko imports invoke (its YAML reader, asyncio, unittest.mock) only to run an SSH
    config's ``Match exec``: podstate's check starts without it (pyinfra's own CLI imports
    paramiko before podstate is imported, so it cannot)."""
    seen = _until_connect(tmp_path, [str(BIN / "podstate"), "check"])
    assert "paramiko.config" in seen["modules"]
    assert [m for m in seen["modules"] if m.startswith("invoke.")] == []


def test_a_deferred_module_loads_at_its_first_use_and_a_missing_one_fails_as_before():
    program = (
        "import sys\n"
        "from podstate.pyinfra_api import deferred\n"
        "deferred.defer('invoke', 'podstate_no_such_module')\n"
        "from paramiko.config import SSHConfig\n"
        "loaded = 'invoke.collection' in sys.modules\n"
        "config = SSHConfig.from_text('Match exec \"true\"\\n  User bob\\n')\n"
        "print(loaded, config.lookup('pod').get('user'), 'invoke.collection' in sys.modules)\n"
        "try:\n"
        "    import podstate_no_such_module\n"
        "except ImportError:\n"
        "    print('ImportError')\n"
    )
    done = _python(program)
    assert (done.stdout, done.stderr) == ("False bob True\nImportError\n", "")
