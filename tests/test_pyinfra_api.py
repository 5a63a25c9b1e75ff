"""The pyinfra internals podstate relies on (podstate/pyinfra_api.py), tried on pyinfra's
own API with its @local connector: these fail loudly if a pyinfra release changes them."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pyinfra
import pytest
from pyinfra.api import Config, Inventory, State, StringCommand
from pyinfra.api.connect import connect_all
from pyinfra.api.operation import add_op
from pyinfra.api.operations import run_ops
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host, ctx_state
from pyinfra.operations import files, server

from podstate import pyinfra_api


@pytest.fixture
def state():
    inventory = Inventory((["@local"], {}))
    state = State(inventory, Config(), check_for_changes=True)
    ctx_state.set(state)
    connect_all(state)
    return state


def shell(state: State, name: str, command: str) -> str:
    """Add a ``server.shell`` operation on every host; return its hash."""
    (host,) = state.inventory
    before = set(state.ops.get(host, ()))
    add_op(state, server.shell, name=name, commands=[command])
    (added,) = set(state.ops[host]) - before
    return added


def names(state: State) -> list[str]:
    return [sorted(state.op_meta[h].names)[0] for h in state.get_op_order()]


def test_bookends_stay_first_and_last_when_later_files_add_operations(state):
    (host,) = state.inventory
    shell(state, "middle", "true")
    first, last = shell(state, "first", "true"), shell(state, "last", "true")
    pyinfra_api.bookend(host, first=[first], last=[last])
    shell(state, "added later", "true")
    assert names(state) == ["first", "middle", "added later", "last"]
    assert pyinfra_api.host_ops_after(state, host, first)[-1] == last


def test_a_command_before_the_first_only_when_there_is_one(state, tmp_path: Path):
    (host,) = state.inventory
    log = tmp_path / "log"
    before = set(state.ops.get(host, ()))
    add_op(state, files.directory, name="quiet", path=str(tmp_path))  # exists: no change
    (quiet,) = set(state.ops[host]) - before
    loud = shell(state, "loud", f"echo loud >> {log}")
    for op_hash in (quiet, loud):
        pyinfra_api.before_first_command(state, host, op_hash, lambda: f"echo lock >> {log}")
    with ctx_host.use(host):
        assert not pyinfra_api.will_change(state, host, quiet)
        assert pyinfra_api.will_change(state, host, loud)
    run_ops(state)
    assert log.read_text() == "lock\nloud\n"


def test_file_number_is_the_place_of_the_deploy_file(state, monkeypatch):
    """As the CLI plans deploy files: operations called directly, numbered by file."""
    (host,) = state.inventory
    monkeypatch.setattr(pyinfra, "is_cli", True)
    state.set_stage(StateStage.Prepare)
    pyinfra_api.set_file_number(state, 3)
    with ctx_host.use(host):
        server.shell(name="from the fourth file", commands=["true"])
    (op_hash,) = state.ops[host]
    assert pyinfra_api.file_number(state, op_hash) == 3


def test_commands_generated_then_replaced_with_a_time_limit(state, tmp_path: Path):
    (host,) = state.inventory
    log = tmp_path / "log"
    op_hash = shell(state, "loud", f"echo planned >> {log}")
    host.current_op_hash = "running"
    with ctx_host.use(host), pyinfra_api.op_context_kept(host):
        produced = list(pyinfra_api.commands(state, host, op_hash))
    assert host.current_op_hash == "running"  # the generator cleared it; it is back
    host.current_op_hash = None
    assert [command.get_raw_value() for command in produced] == [f"echo planned >> {log}"]
    replaced = StringCommand(f"echo replaced >> {log}")
    pyinfra_api.replace_commands(state, host, op_hash, lambda: iter([replaced]))
    pyinfra_api.set_timeout(state, host, op_hash, 7)
    assert state.get_op_data_for_host(host, op_hash).global_arguments["_timeout"] == 7
    run_ops(state)
    assert log.read_text() == "replaced\n"


def _orders(state: State) -> tuple[list[int], list[int]]:
    """Return pyinfra's operation order and podstate's, called from the same line."""
    original = pyinfra_api.ORIGINALS["get_operation_order_from_stack"]
    return original(state), pyinfra_api._operation_order(state)


def test_operation_order_is_pyinfra_s_own_without_reading_sources(state, monkeypatch):
    """As pyinfra's CLI plans a deploy file: the same line numbers, from the deploy file's
    line on, then numbered by file; and the same again from an unnamed file."""
    monkeypatch.setattr(pyinfra, "is_cli", True)
    state.current_op_file_number = 2
    deploy = "deploy/team.py"
    source = "\n\ndef inner():\n    return orders(state)\n\nresult = inner()\n"
    code = compile(source, deploy, "exec")
    for current in (deploy, None):
        state.current_deploy_filename = current
        scope = {"orders": _orders, "state": state}
        exec(code, scope)
        original, ours = scope["result"]
        assert ours == original
    assert original[0] == 2
    state.current_deploy_filename = deploy
    exec(code, scope)
    assert scope["result"][1][:3] == [2, 6, 4]  # file number, then the deploy file's lines


def test_planning_faster_plans_the_same_operations(state, monkeypatch):
    """With pyinfra's functions replaced, an operation gets the arguments and order it got."""
    (host,) = state.inventory
    monkeypatch.setattr(pyinfra, "is_cli", True)
    state.set_stage(StateStage.Prepare)
    arguments_before = pyinfra_api.ORIGINALS["all_global_arguments"]()
    pyinfra_api.plan_faster()
    from pyinfra.api import arguments

    assert arguments.all_global_arguments() == arguments_before
    with ctx_host.use(host):
        server.shell(name="planned", commands=["true"], _sudo=False)
    (op_hash,) = state.ops[host]
    assert state.op_meta[op_hash].op_order[0] == state.current_op_file_number
    assert state.get_op_data_for_host(host, op_hash).global_arguments["_sudo"] is False


def test_entry_points_read_once_answer_as_importlib_does():
    asking = metadata.entry_points
    expected = asking(group="console_scripts")
    with pyinfra_api._entry_points_read_once():
        assert list(metadata.entry_points(group="console_scripts")) == list(expected)
        assert list(metadata.entry_points().select(group="console_scripts")) == list(expected)
    assert metadata.entry_points is asking


def test_podstate_reads_installed_packages_once_before_connecting():
    """Importing the check (and with it pyinfra's CLI, which patches the standard library
    with gevent) reads the installed packages' metadata for gevent once, not once per gevent
    plugin group: that cost a quarter of a second before the first connection."""
    program = (
        "import traceback\n"
        "from importlib import metadata\n"
        "reads = []\n"
        "distributions = metadata.distributions\n"
        "def counted(**select):\n"
        "    stack = traceback.extract_stack()\n"
        "    reads.append(any('/gevent/' in frame.filename for frame in stack))\n"
        "    return distributions(**select)\n"
        "metadata.distributions = counted\n"
        "import podstate.cli\n"
        "from gevent import monkey\n"
        "print(sum(reads), monkey.is_module_patched('socket'))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.stdout.split() == ["1", "True"], out.stderr
