"""The pyinfra internals podstate relies on (podstate/pyinfra_api/), tried on pyinfra's own
API with its @local connector: these fail loudly if a pyinfra release changes them. They run
against every pyinfra minor podstate supports (``make pyinfra-compat``)."""

from __future__ import annotations

import os
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

from podstate.pyinfra_api import entry_points, execute
from podstate.pyinfra_api import plan as pyinfra_api
from podstate.pyinfra_api.verify import PYINFRA_MINORS, verify

ROOT = Path(__file__).resolve().parent.parent


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


def test_a_hosts_order_is_its_part_of_the_runs_order(monkeypatch):
    """Operations on every host, on some, bookended on one, added after the bookends: each
    host's order is the run's order (pyinfra's, over every host) of its own operations."""
    inventory = Inventory((list("abc"), {}))
    state = State(inventory, Config(), check_for_changes=True)
    ctx_state.set(state)
    monkeypatch.setattr(pyinfra, "is_cli", True)  # operations named by their lines, as in a run
    state.set_stage(StateStage.Prepare)
    for host in inventory:
        state.activate_host(host)  # planned only: no connection needed
    a, b, c = inventory

    def on(hosts: list, command: str) -> None:
        for host in hosts:
            with ctx_host.use(host):
                server.shell(commands=[command])

    on([a, b, c], "true")
    on([a], "echo 1")
    on([b], "echo 2")
    on([c, a], "echo 3")
    on([b], "echo 4")
    before = list(b.op_hash_order)
    pyinfra_api.bookend(b, first=before[2:], last=before[1:2])  # its own: echo 4, echo 2
    on([a, b, c], "later")
    whole = state.get_op_order()
    for host in inventory:
        assert pyinfra_api.host_order(state, host) == [h for h in whole if h in state.ops[host]]
    (later,) = set(b.op_hash_order) - set(before)
    assert pyinfra_api.host_order(state, b) == [before[2], before[0], later, before[1]]


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
    original = pyinfra_api._originals()["get_operation_order_from_stack"]
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
    arguments_before = pyinfra_api._originals()["all_global_arguments"]()
    pyinfra_api.plan_faster()
    from pyinfra.api import arguments

    assert arguments.all_global_arguments() == arguments_before
    with ctx_host.use(host):
        server.shell(name="planned", commands=["true"], _sudo=False)
    (op_hash,) = state.ops[host]
    assert state.op_meta[op_hash].op_order[0] == state.current_op_file_number
    assert state.get_op_data_for_host(host, op_hash).global_arguments["_sudo"] is False


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"_sudo": False, "_env": {"A": "b"}}, {"_timeout": 7, "name": "kept", "_chdir": "/"}],
    ids=["none", "some", "others kept"],
)
def test_global_arguments_are_popped_as_pyinfra_pops_them(kwargs):
    """Host data that sets global arguments in several layers (the pod's own over its
    group's), a deploy's arguments and the operation's own: the same arguments, the same keys
    found and the same keyword arguments left as pyinfra's own, and a value taken from the
    data is a copy of it, as pyinfra's lookup gives."""
    inventory = Inventory(
        ([("pod", {"_sudo": True})], {"_retries": 1, "_sudo": False}),
        trainers=(["pod"], {"_env": {"GROUP": "1"}, "_sudo": False, "_retries": 2}),
    )
    state = State(inventory, Config())
    (host,) = inventory
    host.current_deploy_kwargs = {"_timeout": 5}
    original = pyinfra_api._originals()["pop_global_arguments"]
    theirs_kwargs, ours_kwargs = dict(kwargs), dict(kwargs)
    theirs = original(state, host, theirs_kwargs)
    ours = pyinfra_api._pop_global_arguments(state, host, ours_kwargs)
    assert ours == theirs and ours_kwargs == theirs_kwargs
    assert ours[0]["_sudo"] is kwargs.get("_sudo", True) and ours[0]["_retries"] == 2
    if "_env" not in kwargs:
        ours[0]["_env"]["GROUP"] = "changed"
        assert host.data._env == {"GROUP": "1"}


def test_entry_points_read_once_answer_as_importlib_does():
    from pyinfra.api import connectors

    asking = metadata.entry_points
    expected = asking(group="console_scripts")
    with entry_points.read_once():
        assert list(metadata.entry_points(group="console_scripts")) == list(expected)
        with entry_points.read_once():  # a block within: the same reading
            assert list(metadata.entry_points().select(group="console_scripts")) == list(expected)
        assert set(connectors.get_all_connectors()) >= {"ssh", "local"}
    assert metadata.entry_points is asking and connectors.entry_points is asking


def test_entry_points_are_read_once_in_a_block():
    """Every asking in a block, pyinfra's connectors' included, is answered from one reading
    of the installed packages."""
    from pyinfra.api import connectors

    reads = []
    distributions = metadata.distributions
    try:
        metadata.distributions = lambda **select: reads.append(1) or distributions(**select)
        with entry_points.read_once():
            metadata.entry_points(group="console_scripts")
            connectors.get_all_connectors()
            Inventory((["@local"], {}))
    finally:
        metadata.distributions = distributions
    assert len(reads) == 1


def test_the_check_reads_installed_packages_once_before_connecting():
    """Loading the check's inventory imports pyinfra's CLI, which patches the standard library
    with gevent: that reads the installed packages' metadata for gevent once, not once per
    gevent plugin group (a quarter of a second before the first connection)."""
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
        "patched = monkey.is_module_patched('socket')\n"
        "from podstate.pyinfra_api import cli\n"
        "cli._cli()\n"
        "print(sum(reads), patched, monkey.is_module_patched('socket'))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.stdout.split() == ["1", "False", "True"], out.stderr


def test_a_command_runs_and_prints_as_pyinfra_runs_it(state, caplog):
    """A command with the operation's connector arguments, its output as lines; a failed
    one's output printed as pyinfra prints it, one error line per line, with the pod."""
    (host,) = state.inventory
    op_hash = shell(state, "env", "true")
    pyinfra_api.set_timeout(state, host, op_hash, 5)
    arguments = execute.connector_arguments(host, state, op_hash)
    assert arguments["_timeout"] == 5 and arguments["_sudo"] is False
    status, lines = execute.run_shell(state, host, "echo out; echo err >&2; exit 3", arguments)
    assert not status and ("stdout", "out") in lines and ("stderr", "err") in lines
    execute.print_failed_output(host, lines)
    said = [pyinfra_cli_line(r.getMessage()) for r in caplog.records]
    assert ("@local", "out") in said and ("@local", "err") in said


def pyinfra_cli_line(message: str) -> tuple[str, str] | None:
    from podstate.pyinfra_api.logs import pod_line

    return pod_line(message)


def test_verify_passes_on_the_installed_pyinfra():
    """The installed pyinfra is one podstate supports, and has every internal it uses."""
    assert metadata.version("pyinfra").rsplit(".", 1)[0] in PYINFRA_MINORS
    verify()


LEAVES_NOTHING = """
import gc, sys
gc.disable()  # whatever verifying made stays to be seen, garbage or not
from gevent.hub import Hub
from gevent.pool import Pool
from pyinfra import context
from pyinfra.api import Inventory, State
from podstate.pyinfra_api import connect, plan
from podstate.pyinfra_api.verify import verify

managers = (context.ctx_state, context.ctx_host, context.ctx_inventory, context.ctx_config)
def contexts():
    return [m.get() if m.isset() else None for m in managers]
before = contexts()
verify(); connect.quiet(); plan.plan_faster()  # as podstate's inventory file does
made = [type(o).__name__ for o in gc.get_objects() if isinstance(o, (State, Inventory, Pool, Hub))]
print(made, contexts() == before, flush=True)
import pyinfra_cli  # pyinfra's CLI patches the standard library with gevent, after the check
from pyinfra.connectors import vagrant  # verified: its threads are then gevent's
vagrant.local.shell = lambda command, splitlines: (
    ["1,pod,state,running"] if "status" in command else ["Host pod", "HostName 127.0.0.1"]
)
print([name for name, _, _ in vagrant.VagrantInventoryConnector.make_names_data()])
"""


def test_verifying_and_the_replacements_leave_nothing_behind():
    """In a fresh process, as the check starts (it verifies before pyinfra's CLI patches the
    standard library): no State, Inventory, gevent pool or hub, pyinfra's context as it was,
    and what a user's deploy file might then use (the vagrant connector's threads) works, and
    the process ends by itself. An Inventory made by verify() imported every connector
    first: vagrant's then waited on real threads with gevent's locks, forever."""
    out = subprocess.run(
        [sys.executable, "-c", LEAVES_NOTHING], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.splitlines() == ["[] True", "['@vagrant/pod']"], out.stderr[-2000:]


BREAKS = {  # the internal the line names: a program that breaks it, as a release might
    "op_hash_order": (
        "from pyinfra.api import Host\n"
        "init = Host.__init__\n"
        "def changed(self, *args, **kwargs):\n"
        "    init(self, *args, **kwargs)\n"
        "    self.op_hash_order = {}\n"
        "Host.__init__ = changed\n"
    ),
    "CONNECTOR_ARGUMENT_KEYS": "import pyinfra.api.arguments as m\ndel m.CONNECTOR_ARGUMENT_KEYS\n",
    "make_unix_command_for_host": (
        "import pyinfra.connectors.util as m\n"
        "m.make_unix_command_for_host = lambda host, state, command: None\n"
    ),
    "print_prefix": (
        "from pyinfra.api import Host\n"
        "Host.print_prefix = property(lambda self: f'{self.name}: ')\n"
    ),
}


def _one_line(out: subprocess.CompletedProcess, name: str) -> str:
    """Return the line naming the supported minors and ``name``; assert there is one, and
    no traceback."""
    supported = " and ".join(f"{minor}.x" for minor in PYINFRA_MINORS)
    start = f"podstate supports pyinfra {supported}; the installed pyinfra "
    said = [line for line in (out.stdout + out.stderr).splitlines() if start in line]
    assert out.returncode == 1 and len(said) == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert f"{start}{metadata.version('pyinfra')} " in said[0] and name in said[0]
    return said[0]


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_podstate_names_a_broken_internal_in_one_line(name):
    """With an internal removed or changed, a ``podstate`` command stops at its start with
    one line naming the supported minors and the internal."""
    program = (
        BREAKS[name]
        + "import sys\nfrom podstate.cli import main\nsys.exit(main(['sandbox', 'status']))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert _one_line(out, name).startswith("podstate: ")
    assert out.stdout == ""  # the command did not run


def test_the_command_names_a_removed_internal_module_in_one_line():
    """A release without a whole module podstate imports: the ``podstate`` command still
    stops with one line (it verifies before importing the modules that use one)."""
    program = (
        "import sys\nsys.modules['pyinfra.api.connect'] = None  # no such module\n"
        "sys.argv = ['podstate', 'sandbox', 'status']\n"
        "from podstate.__main__ import main\nsys.exit(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert _one_line(out, "pyinfra.api.connect").startswith("podstate: ")
    assert out.stdout == ""


def test_a_deploy_stops_at_a_broken_internal_before_connecting():
    """``pyinfra -y inventories/pods.py deploy/pod.py`` stops with the same line while it loads
    the inventory, before it connects to any pod."""
    program = (
        BREAKS["CONNECTOR_ARGUMENT_KEYS"]
        + "import sys\nsys.argv = ['pyinfra', '-y', 'inventories/pods.py', 'deploy/pod.py']\n"
        "from pyinfra_cli.main import main\nmain()\n"
    )
    env = {**os.environ, "PODSTATE_PODS": "inventories/pods.example.yaml"}
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, env=env
    )
    _one_line(out, "CONNECTOR_ARGUMENT_KEYS")
    assert "Connecting" not in out.stdout + out.stderr


def test_the_check_plans_deploy_files_as_pyinfra_s_cli(tmp_path):
    """In a process of its own (pyinfra's CLI patches the standard library): each file is
    numbered by its place, planned with the run's config (not one an earlier file changed),
    and a file that raises fails its pod with the file's own exception, the later files
    unplanned there."""
    first, second, third = (tmp_path / f"{n}.py" for n in ("first", "second", "third"))
    first.write_text(
        "from pyinfra import config\nfrom pyinfra.operations import server\n"
        "config.SUDO = True\nserver.shell(name='one', commands=['true'])\n"
    )
    second.write_text("from pyinfra import config\nassert not config.SUDO\nraise KeyError('x')\n")
    third.write_text("from pyinfra.operations import server\nserver.shell(commands=['true'])\n")
    program = (
        "import sys\n"
        "from podstate.pyinfra_api import cli, plan\n"
        "state, config = cli.new_state(5)\n"
        "inventory = cli.load_inventory('@local')\n"
        "from pyinfra.api import BaseStateCallback\n"
        "cli.connect(state, inventory, config, None, BaseStateCallback())\n"
        "failed = []\n"
        "cli.load_deploy_files(state, sys.argv[1:], lambda h, d, e: failed.append((d, repr(e))))\n"
        "(host,) = inventory\n"
        "print([plan.file_number(state, h) for h in plan.host_order(state, host)], failed)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program, str(first), str(second), str(third)],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == f"[0] [({str(second)!r}, \"KeyError('x')\")]", out.stderr
