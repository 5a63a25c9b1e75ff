"""The check's run as pyinfra's CLI drives one: its state, inventory, connections and deploy
files; and what the CLI's SSH connector keeps in the process (known hosts, parallelism)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
import pyinfra
from pyinfra import context
from pyinfra.api import Config, Host, Inventory, State
from pyinfra.api import connect as api_connect
from pyinfra.api import state as api_state
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.state import BaseStateCallback
from pyinfra.connectors.sshuserclient import client as ssh_client

from podstate.pyinfra_api import entry_points, plan, scope


def _cli() -> Any:
    """Return pyinfra's CLI package, imported (and gevent's patches applied) on first use.

    The check needs both: the CLI's inventory and deploy file loading, and a standard library
    whose sockets let every pod's connection proceed at once."""
    with entry_points.read_once():  # gevent asks for them 25 times as it patches
        import pyinfra_cli.inventory
        import pyinfra_cli.util
    return pyinfra_cli


def new_state(timeout: int) -> tuple[State, Config]:
    """Return a State and Config for planning as pyinfra's CLI plans (``pyinfra.is_cli``, the
    current state and config set), connections bounded by ``timeout`` seconds; a run of
    podstate's, whose every host its replacements answer for (``scope``)."""
    pyinfra.is_cli = True
    make_config: Callable[..., Config] = Config  # pyinfra's Config(**options), unannotated
    state, config = State(check_for_changes=True), make_config(CONNECT_TIMEOUT=timeout)
    scope.claim(state)
    # pyinfra's context managers are unannotated: set(object) makes it the current one
    set_state: Callable[[State], None] = context.ctx_state.set
    set_config: Callable[[Config], None] = context.ctx_config.set
    set_state(state)
    set_config(config)
    return state, config


def load_inventory(path: str) -> Inventory:
    """Return the inventory pyinfra's CLI makes of the file ``path`` (a SystemExit the file
    raises passes through), set as the current one."""
    inventory: Inventory = _cli().inventory.make_inventory(path, cwd=os.getcwd())
    set_inventory: Callable[[Inventory], None] = context.ctx_inventory.set  # unannotated
    set_inventory(inventory)
    return inventory


def inventory_of(hosts: list[tuple[str, dict[str, Any]]]) -> Inventory:
    """Return an inventory of ``hosts`` (each its name and host data), in no group: for a
    run podstate drives on pods it names itself (the watch's lock)."""
    make: Callable[..., Inventory] = Inventory  # pyinfra's Inventory(names_data), unannotated
    return make((hosts, {}))


def connect(
    state: State,
    inventory: Inventory,
    config: Config,
    hosts: list[Host] | None,
    callback: BaseStateCallback,
) -> None:
    """Connect to ``hosts`` (None: every pod) as pyinfra's CLI does, ``callback`` told of
    each failure; a pod that fails is left unconnected."""
    state.init(inventory, config, initial_limit=hosts)
    add_callback: Callable[[BaseStateCallback], None] = state.add_callback_handler  # unannotated
    add_callback(callback)
    state.set_stage(api_state.StateStage.Connect)
    try:
        api_connect.connect_all(state)
    except PyinfraError:
        pass  # every pod unreachable: each is unconnected, and the callback told why


def load_deploy_files(
    state: State,
    deploys: list[str],
    failed: Callable[[Host, str, BaseException], None],
    planned: Callable[[Host], None] = lambda host: None,
) -> None:
    """Plan every deploy file on every active pod, in order, each pod in parallel, as
    pyinfra's CLI does (numbered by file, with the config each file changes put back after
    it); an exception a pod's file raises is ``failed(host, deploy, exception)``, and that
    pod plans no further file. ``planned(host)`` is called as each pod is done: its last
    file planned, or one failed."""
    cli = _cli()
    state.set_stage(api_state.StateStage.Prepare)
    failures: set[str] = set()

    def load(host: Host, deploy: str, last: bool) -> None:
        try:
            with context.ctx_config.use(state.config.copy()), context.ctx_host.use(host):
                cli.util.exec_file(deploy)
        except Exception as e:  # a broken pod must not stop the others
            failures.add(host.name)
            failed(host, deploy, getattr(e, "exception", e))  # the CLI wraps the file's error
            last = True
        if last:
            planned(host)

    for number, deploy in enumerate(deploys):
        state.config.lock_current_state()
        state.current_deploy_filename = deploy
        plan.set_file_number(state, number)
        hosts = [h for h in state.inventory.get_active_hosts() if h.name not in failures]
        last = number == len(deploys) - 1
        gevent.joinall([state.pool.spawn(load, host, deploy, last) for host in hosts])
        state.config.reset_locked_state()


@contextmanager
def current_host(host: Host) -> Iterator[None]:
    """Make ``host`` pyinfra's current host (``from pyinfra import host``) within the block."""
    with context.ctx_host.use(host):
        yield


def disconnect(state: State) -> None:
    """Disconnect from every pod, as pyinfra's CLI ends a run."""
    state.set_stage(api_state.StateStage.Disconnect)
    api_connect.disconnect_all(state)


def failed(state: State, host: Host) -> bool:
    """Return whether pyinfra failed ``host`` in this run (a fact or operation error)."""
    return host in state.failed_hosts


def forget_known_hosts() -> None:
    """Drop pyinfra's in-process cache of parsed known_hosts files (``get_host_keys``,
    memoized), so that the next connection reads the files again."""
    cache = getattr(ssh_client.get_host_keys, "cache", None)
    if isinstance(cache, dict):
        cache.clear()


def max_parallel() -> int | None:
    """Return the most connections pyinfra runs at once without a warning (from the open
    files limit); None where this pyinfra lacks it (then ``verify()`` stops every run)."""
    return getattr(api_state, "MAX_PARALLEL", None)
