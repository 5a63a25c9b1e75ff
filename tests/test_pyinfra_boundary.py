"""The boundary around pyinfra's internals: only podstate/pyinfra_api/ touches them, importing
podstate patches nothing, what podstate replaces in pyinfra treats only podstate's pods
otherwise, and every package podstate imports is a declared dependency."""

from __future__ import annotations

import ast
import logging
import socket
import subprocess
import sys
import threading
import tomllib
from importlib import metadata
from pathlib import Path

import pyinfra.api
import pytest
from pyinfra.api import Config, Host, Inventory, State
from pyinfra.api.exceptions import ConnectError, PyinfraError

from podstate.pyinfra_api import connect, plan

ROOT = Path(__file__).resolve().parent.parent
BOUNDARY = ROOT / "podstate" / "pyinfra_api"
SOURCES = sorted(
    p for d in ("podstate", "roles") for p in (ROOT / d).rglob("*.py") if BOUNDARY not in p.parents
)
PUBLIC = ("pyinfra.api.exceptions", "pyinfra.api.command", "pyinfra.operations", "pyinfra.facts")
FROM_PYINFRA = {"host", "state", "logger", "config", "inventory", "api", "operations", "facts"}
# Undocumented attributes of pyinfra's State, Host, operation data and module (any receiver),
# and those whose names are common words (only on a receiver named state, host or pyinfra).
INTERNAL_ATTRIBUTES = set(
    """op_hash_order op_meta get_op_order get_op_data_for_host command_generator operation_meta
    current_op_hash current_op_global_arguments current_op_deploy_data current_deploy_name
    in_op loop_position current_op_file_number current_deploy_filename print_prefix log_styled
    run_shell_command print_output print_input failed_hosts is_cli set_stage
    add_callback_handler get_transport""".split()
)
ON_PYINFRA_NAMES = {"ops", "pool", "init", "connector"}
PYINFRA_NAMES = {"state", "host", "current_host", "pyinfra"}


def _internal_module(module: str) -> bool:
    """Return whether importing ``module`` reaches into pyinfra's internals."""
    if module.split(".")[0] == "pyinfra_cli":
        return True
    if not module.startswith("pyinfra.") or module == "pyinfra.api":
        return False
    return not any(module == p or module.startswith(p + ".") for p in PUBLIC)


def _uses(path: Path) -> list[str]:
    """Return each use of a pyinfra internal in the module at ``path``, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if _internal_module(a.name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [a.name for a in node.names]
            bad = _internal_module(node.module) and not (
                node.module == "pyinfra.api.state" and names == ["State"]
            )
            if node.module == "pyinfra":
                bad = not set(names) <= FROM_PYINFRA
            if node.module == "pyinfra.api":  # what it exports, not its modules
                bad = any(
                    name not in vars(pyinfra.api) or isinstance(vars(pyinfra.api)[name], type(ast))
                    for name in names
                )
            found += [f"{node.lineno}: from {node.module} import {', '.join(names)}"] if bad else []
        elif isinstance(node, ast.Attribute):
            base = node.value.id if isinstance(node.value, ast.Name) else None
            if node.attr in INTERNAL_ATTRIBUTES or (
                node.attr in ON_PYINFRA_NAMES and base in PYINFRA_NAMES
            ):
                found.append(f"{node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_boundary_touches_pyinfra_s_internals(path):
    assert _uses(path) == [], f"{path.relative_to(ROOT)}: move these into podstate/pyinfra_api/"


def test_the_scan_finds_what_it_forbids(tmp_path):
    """The scan fails a module that imports an internal or touches an internal attribute."""
    module = tmp_path / "module.py"
    module.write_text(
        "from pyinfra.api.util import format_text\nfrom pyinfra.api import arguments, Host\n"
        "from pyinfra import context, host\nimport pyinfra_cli\n"
        "order = host.op_hash_order\nplanned = state.ops\nfound.ops = 1\n"
    )
    assert [use.split(":")[0] for use in _uses(module)] == ["1", "2", "3", "4", "5", "6"]


def test_importing_podstate_patches_nothing():
    """Importing podstate (the roles, the run, the check, the command) neither imports
    pyinfra's CLI nor lets gevent patch the standard library: only the check does, once it
    loads its inventory."""
    modules = [
        "podstate.pyinfra_api.plan",
        "podstate.pyinfra_api.cli",
        "podstate.pyinfra_api.execute",
        "podstate.pyinfra_api.verify",
        "podstate.roles.files",
        "podstate.run.fold",
        "podstate.run.bookkeeping",
        "podstate.pod.bookends",
        "podstate.check.runner",
        "podstate.cli",
    ]
    program = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "from gevent import monkey\n"
        "print('pyinfra_cli' in sys.modules, monkey.is_anything_patched())\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"], out.stderr


def _top_level_imports() -> set[str]:
    names = set()
    for path in SOURCES + sorted(BOUNDARY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"podstate"}


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_every_package_podstate_imports_is_a_declared_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {
        _normal(d.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip())
        for d in project["dependencies"]
    }
    distributions = metadata.packages_distributions()
    imported = {name: distributions.get(name, [name]) for name in _top_level_imports()}
    undeclared = {
        name: dists
        for name, dists in imported.items()
        if not any(_normal(d) in declared for d in dists)
    }
    assert undeclared == {}, "declare these in pyproject.toml [project] dependencies"


def test_pyproject_pins_pyinfra_to_the_supported_minors():
    """pyproject's pin follows PYINFRA_MINORS: from the first minor to before the one after
    the last, so that a pip install gets only a pyinfra that make pyinfra-compat tests."""
    from podstate.pyinfra_api.verify import PYINFRA_MINORS

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (pin,) = [d for d in project["dependencies"] if d.startswith("pyinfra")]
    major, last = PYINFRA_MINORS[-1].split(".")
    assert pin == f"pyinfra>={PYINFRA_MINORS[0]},<{major}.{int(last) + 1}"


def _two_hosts(**data: object) -> tuple[Host, Host]:
    """Return a pod of podstate's (its data has a desired state) and another host, with the
    same ``data``, in a State of their own."""
    inventory = Inventory(([("pod", {**data, "podstate": {}}), ("other", dict(data))], {}))
    State(inventory, Config(CONNECT_TIMEOUT=5))
    pod, other = inventory
    return pod, other


def test_a_failed_connect_is_podstate_s_one_line_for_its_pods_alone(tmp_path):
    """With ``quiet()``, a key file that is not there: podstate's pod fails with podstate's
    ConnectError; any other host with pyinfra's own error, as if podstate were not loaded."""
    connect.quiet()
    pod, other = _two_hosts(ssh_key=str(tmp_path / "id_none"), ssh_hostname="127.0.0.1")
    with pytest.raises(ConnectError, match="^no such key file: "):
        pod.connector.connect()
    with pytest.raises(PyinfraError, match="^No such private key file: ") as raised:
        other.connector.connect()
    assert not isinstance(raised.value, ConnectError)


@pytest.fixture
def no_banner():
    """Return the port of a local server that answers each connection with a line that is no
    SSH banner, and closes it."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                conn.sendall(b"no banner here\r\n")

    threading.Thread(target=answer, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_paramiko_s_errors_are_dropped_for_podstate_s_pods_alone(no_banner, tmp_path, caplog):
    """paramiko's transport logs a traceback for a server that sends no SSH banner: not for
    podstate's pod (pyinfra reports the failure in one line), but for any other host."""
    connect.quiet()
    data = {"ssh_hostname": "127.0.0.1", "ssh_port": no_banner, "ssh_user": "nobody"}
    pod, other = _two_hosts(**data, ssh_known_hosts_file=str(tmp_path / "known_hosts"))
    logged = {}
    for host in (pod, other):
        caplog.clear()
        with caplog.at_level(logging.INFO), pytest.raises(ConnectError):
            host.connector.connect()
        logged[host.name] = [r.levelname for r in caplog.records if r.name == "paramiko.transport"]
    assert "ERROR" not in logged["pod"] and "ERROR" in logged["other"], logged


def test_only_podstate_s_pods_have_their_arguments_read_from_merged_data(monkeypatch):
    """``plan_faster``'s popping of global arguments reads podstate's pods through a merged
    view of their data; pyinfra's own function reads any other host itself."""
    pod, other = _two_hosts()
    read = []
    pop = lambda state, host, kwargs: read.append(type(host).__name__)  # noqa: E731
    monkeypatch.setitem(plan._originals(), "pop_global_arguments", pop)
    for host in (pod, other):
        plan._pop_global_arguments(host.state, host, {})
    assert read == ["_ArgumentsHost", "Host"]
