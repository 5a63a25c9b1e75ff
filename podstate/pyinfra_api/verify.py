"""``verify()``: the installed pyinfra has every internal podstate relies on, as it uses it.

``PYINFRA_MINORS`` is the one list of the pyinfra minors podstate supports: pyproject's pin
follows it, and scripts/pyinfra-compat.sh tests each of them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pyinfra
from pyinfra.api import Host, Inventory
from pyinfra.api.exceptions import PyinfraError

from podstate.pyinfra_api import ssh
from podstate.pyinfra_api.logs import pod_line

PYINFRA_MINORS = ("3.9", "3.10")  # the pyinfra minors podstate supports and CI tests

# Each internal and the parameters its signature starts with, as podstate calls it.
_CALLED = {
    "pyinfra.api.arguments.all_global_arguments": [],
    "pyinfra.api.arguments.pop_global_arguments": ["state", "host", "kwargs"],
    "pyinfra.api.host.HostData.dict": ["self"],
    "pyinfra.api.operation.get_operation_order_from_stack": ["state"],
    "pyinfra.api.util.format_text": ["text"],
    "pyinfra.api.util.print_host_combined_output": ["host", "output"],
    "pyinfra.connectors.util.make_unix_command_for_host": ["state", "host", "command"],
    "pyinfra.connectors.util.OutputLine": ["buffer_name", "line"],
    "pyinfra.connectors.util.CommandOutput": ["combined_lines"],
    "pyinfra.api.connect.connect_all": ["state"],
    "pyinfra.connectors.ssh.SSHConnector.connect": ["self"],
    "pyinfra.api.connect.disconnect_all": ["state"],
    "pyinfra.connectors.sshuserclient.client.get_missing_host_key_policy": ["policy"],
    "pyinfra.connectors.sshuserclient.client.append_hostkey": ["client", "hostname", "key"],
    "pyinfra.api.host.Host.log_styled": ["self", "message", "log_func"],
    "pyinfra.api.host.Host.run_shell_command": ["self"],
    "pyinfra.api.config.Config.lock_current_state": ["self"],
    "pyinfra.api.config.Config.reset_locked_state": ["self"],
}
# Internals used as they are, and the attributes classes declare (set on each instance).
_USED = """pyinfra.is_cli pyinfra.api.arguments.CONNECTOR_ARGUMENT_KEYS
pyinfra.api.facts.all_global_arguments pyinfra.api.util.PYINFRA_INSTALL_DIR
pyinfra.api.facts.pop_global_arguments pyinfra.api.operation.pop_global_arguments
pyinfra.api.deploy.pop_global_arguments pyinfra.api.host.Host.current_deploy_kwargs
pyinfra.api.state.MAX_PARALLEL pyinfra.api.state.nofile_limit
pyinfra.api.state.StateStage.Connect
pyinfra.api.state.StateStage.Prepare pyinfra.api.state.StateStage.Disconnect
pyinfra.api.operation.OperationMeta.will_change pyinfra.api.host.Host.print_prefix
pyinfra.context.ctx_state pyinfra.context.ctx_config pyinfra.context.ctx_host
pyinfra.context.ctx_inventory pyinfra.context.ContextManager.isset
pyinfra.connectors.sshuserclient.client.get_host_keys.cache
pyinfra.api.state.State.get_op_order pyinfra.api.state.State.init
pyinfra.api.connectors.entry_points""".split()
_DECLARED = {
    "pyinfra.api.host.Host": "connector in_op current_op_hash current_op_global_arguments "
    "current_op_deploy_data current_deploy_name loop_position",
    "pyinfra.api.state.State": "print_input print_output current_op_file_number "
    "current_deploy_filename",
    "pyinfra.api.state.StateOperationHostData": "command_generator global_arguments operation_meta",
    "pyinfra.api.state.StateOperationMeta": "names op_order",
    "pyinfra.connectors.ssh.SSHConnector": "client",
}


class Unsupported(PyinfraError):
    """The installed pyinfra lacks or changed an internal podstate relies on: one line (a
    PyinfraError, so that pyinfra's CLI prints it as one line, without a traceback)."""


def _resolve(dotted: str) -> Any:
    """Return the object a dotted name names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(dotted, name=dotted)


def _cli_source(module: str) -> str:
    """Return the source of a module of pyinfra's CLI, read: importing the CLI patches the
    standard library with gevent."""
    path = Path(pyinfra.__file__).parent.parent / "pyinfra_cli" / f"{module}.py"
    return path.read_text(encoding="utf-8")


def _cli_parameters(module: str, function: str) -> list[str]:
    """Return the parameters of a function of pyinfra's CLI, from its source: its ``def``
    alone is parsed (the whole module would take longer than every other check)."""
    found = re.search(rf"^def {function}\((.*?)\)( -> [^:]+)?:", _cli_source(module), re.M | re.S)
    if found is None:
        raise AttributeError(f"pyinfra_cli.{module} has no {function}")
    (node,) = ast.parse(f"def {function}({found[1]}): pass").body
    assert isinstance(node, ast.FunctionDef)
    return [a.arg for a in node.args.args + node.args.kwonlyargs]


def _starts_with(dotted: str, start: list[str]) -> bool:
    """Return whether the parameters of the callable ``dotted`` names start with ``start``."""
    return list(inspect.signature(_resolve(dotted)).parameters)[: len(start)] == start


def _there(get: Callable[..., object], *arguments: Any) -> bool:
    """Return True once ``get(*arguments)`` found what it looks for (it raises if not)."""
    get(*arguments)
    return True


def _declared(owner: str, name: str) -> bool:
    """Return whether the class ``owner`` names declares the attribute ``name``."""
    return name in _resolve(owner).__annotations__


def _checks() -> Iterator[tuple[str, Callable[[], object]]]:
    """Yield each internal podstate relies on, with a test of the shape it uses: true, and
    raising nothing, while the installed pyinfra has it as podstate uses it."""
    for dotted, start in _CALLED.items():
        yield dotted, functools.partial(_starts_with, dotted, start)
    for dotted in _USED:
        yield dotted, functools.partial(_there, _resolve, dotted)
    for owner, names in _DECLARED.items():
        for name in names.split():
            yield f"{owner}.{name}", functools.partial(_declared, owner, name)
    yield (
        "pyinfra_cli.inventory.make_inventory(inventory, cwd)",
        lambda: {"inventory", "cwd"} <= set(_cli_parameters("inventory", "make_inventory")),
    )
    yield (
        "pyinfra_cli.util.exec_file(filename)",
        lambda: _cli_parameters("util", "exec_file")[:1] == ["filename"],
    )
    yield (
        "pyinfra_cli.exceptions.UnexpectedExternalError.exception",
        lambda: "self.exception = e" in _cli_source("exceptions"),
    )
    yield (
        "pyinfra.connectors.ssh.SSHConnector.data_meta (the keys of the pods file)",
        lambda: ssh.USED_KEYS <= ssh.data_keys(),
    )
    yield (
        "the changed-host-key advice (ssh-keygen -R)",
        lambda: "ssh-keygen -R {" in inspect.getsource(_resolve("pyinfra.connectors.ssh")),
    )
    yield (
        "Host.op_hash_order (a list pyinfra appends to)",
        lambda: (
            type(_sample_host().op_hash_order) is list
            and "host.op_hash_order.append(" in inspect.getsource(_resolve("pyinfra.api.operation"))
        ),
    )
    yield (
        "Host.print_prefix (the pod's log lines)",
        lambda: (
            _assigns("pyinfra.api.host.Host.init", "print_prefix_padding")
            and pod_line(f"{_sample_host().print_prefix}sample") == ("sample", "sample")
        ),
    )
    for name in ("ops", "op_meta", "failed_hosts", "pool"):
        yield f"State.{name}", functools.partial(_assigns, "pyinfra.api.state.State.init", name)


def _sample_host() -> Host:
    """Return a host named ``sample`` on pyinfra's SSH connector, as ``Host.init`` leaves the
    only host of an inventory (its print prefix unpadded), and nothing else.

    It is made without an Inventory or a State, so that verifying leaves nothing behind in
    the process that a user's deploy files then run in: an Inventory imports every connector
    pyinfra has (its entry points), before pyinfra's CLI patches the standard library with
    gevent where podstate verifies first (the check), and pyinfra's vagrant connector then
    joins real threads on gevent's locks, forever; a State makes gevent pools.
    """
    connector = _resolve("pyinfra.connectors.ssh.SSHConnector")
    host = Host("sample", cast(Inventory, None), [], connector)  # read only with its data
    host.print_prefix_padding = ""
    return host


@functools.cache
def _assigned(method: str) -> frozenset[str]:
    """Return the attributes of ``self`` that the method ``method`` names assigns, read from
    its source (calling ``State.init`` makes gevent pools)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(_resolve(method))))
    return frozenset(
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _assigns(method: str, name: str) -> bool:
    """Return whether the method ``method`` names sets ``self.<name>``."""
    return name in _assigned(method)


@functools.cache
def verify() -> None:
    """Raise Unsupported, one line naming the supported pyinfra minors and the first internal
    the installed pyinfra lacks or changed; return None when it has every one.

    Called at the start of every ``podstate`` command and of a deploy, so that a pyinfra
    release that changed an internal stops the run before any pod is touched, instead of
    misbehaving in it."""
    for name, test in _checks():
        try:
            passed = test()
        except (AttributeError, ImportError, KeyError, OSError) as e:
            raise Unsupported(f"{_start()} lacks {name} ({e})") from None
        except Exception as e:  # any other failure: it changed
            raise Unsupported(f"{_start()} changed {name} ({type(e).__name__}: {e})") from None
        if passed is False:
            raise Unsupported(f"{_start()} changed {name}")


def _start() -> str:
    """Return the start of Unsupported's line: the supported minors and the installed
    version, looked up only when one is refused (a lookup reads the installed packages)."""
    from importlib import metadata

    supported = " and ".join(f"{minor}.x" for minor in PYINFRA_MINORS)
    try:
        version = metadata.version("pyinfra")
    except metadata.PackageNotFoundError:
        version = "(of no known version)"
    return f"podstate supports pyinfra {supported}; the installed pyinfra {version}"
