"""Operations as pyinfra plans them: each pod's operations, their order, commands and
arguments, and three of pyinfra's planning functions replaced by faster ones."""

from __future__ import annotations

import copy
import functools
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

import pyinfra
from pyinfra.api import Host, State, StringCommand, arguments, facts, util

from podstate.pyinfra_api import scope
from podstate.pyinfra_api.verify import verify

api_operation = sys.modules["pyinfra.api.operation"]  # the module, not the decorator
api_deploy = sys.modules["pyinfra.api.deploy"]  # the module, not the decorator
T = TypeVar("T")


def kept(host: Host, kind: type[T]) -> T:
    """Return the ``kind`` object podstate keeps for ``host`` in this run, made empty on first
    use. It lives on pyinfra's host object, which every run (and every check) makes anew, so
    nothing carries from one plan to the next and no table keyed by pod name outlives it."""
    attribute = f"_podstate_{kind.__name__.lower()}"
    found = getattr(host, attribute, None)  # the host itself, or pyinfra's context proxy of it
    if not isinstance(found, kind):
        found = kind()
        setattr(host, attribute, found)
    return found


def op_hashes(state: State, host: Host) -> set[str]:
    """Return the hashes of the operations planned on ``host`` so far."""
    return set(state.ops.get(host, ()))


def host_order(state: State, host: Host) -> list[str]:
    """Return ``host``'s operations in the order the run executes them.

    pyinfra orders a run by sorting every host's operations together, each host's list
    (``op_hash_order``) a chain in it, so each host's come in the order of its own list:
    read from there, the cost is the pod's own operations, where sorting the whole run's
    for each pod made planning a fleet take time of its size squared."""
    planned = state.ops.get(host, {})
    return [h for h in host.op_hash_order if h in planned]


def run_order(state: State) -> list[str]:
    """Return the run's operations in the order pyinfra executes them, every pod's together;
    PyinfraError when no order exists (operations ordered both ways on two pods)."""
    get_op_order: Callable[[], list[str]] = state.get_op_order  # unannotated in pyinfra
    return get_op_order()


def host_ops_after(state: State, host: Host, op_hash: str) -> list[str]:
    """Return the host's operations that run after ``op_hash``, in order."""
    order = host_order(state, host)
    return order[order.index(op_hash) + 1 :]


def op_name(state: State, op_hash: str) -> str:
    """Return an operation's name as pyinfra prints it ("" if it has none)."""
    names = state.op_meta[op_hash].names
    return sorted(names)[0] if names else ""


def current_op(host: Host) -> str:
    """Return the hash of the operation being planned or run on ``host`` ("" outside one)."""
    return host.current_op_hash or ""


def current_host_data() -> Any | None:
    """Return the host data of the pod pyinfra is planning or running for now, None outside
    one (a desired state checked before any pod is: podstate.pod.fits)."""
    current: Callable[[], Host | None] = pyinfra.context.ctx_host.get  # unannotated
    pod = current()
    return pod.data if pod is not None else None


def host_data(host: Host) -> dict[str, Any]:
    """Return ``host``'s data as one dict, its groups' under its own (``HostData.dict``)."""
    merged: Callable[[], dict[str, Any]] = host.data.dict  # unannotated in pyinfra
    return merged()


def current_deploy(host: Host) -> str | None:
    """Return the name of the deploy (podstate: the role) being planned on ``host``."""
    return host.current_deploy_name


class _Bookended(list[str]):
    """A host's operation order whose first and last entries stay first and last: an
    operation added later (by a later deploy file) goes in before the last ones."""

    def __init__(self, items: list[str], first: list[str], last: list[str]) -> None:
        rest = [h for h in items if h not in first and h not in last]
        super().__init__(first + rest + last)
        self.tail = len(last)

    def append(self, op_hash: str) -> None:
        self.insert(len(self) - self.tail, op_hash)


def bookend(host: Host, first: list[str], last: list[str]) -> None:
    """Make the operations ``first`` run before, and ``last`` after, every other operation of
    ``host``: those added so far and those later deploy files add.

    pyinfra runs operations in the order each host added them (``host.op_hash_order``, a
    list it appends to, merged over hosts), whatever deploy file they came from.
    """
    host.op_hash_order = _Bookended(list(host.op_hash_order), first, last)


def set_file_number(state: State, number: int) -> None:
    """Number the deploy file about to be loaded, as pyinfra's CLI does for each file."""
    state.current_op_file_number = number


def file_number(state: State, op_hash: str) -> int:
    """Return the number of the deploy file an operation comes from (its place in the run)."""
    return state.op_meta[op_hash].op_order[0]


def before_first_command(
    state: State, host: Host, op_hash: str, command: Callable[[], str]
) -> None:
    """Make an operation run ``command()`` before its first command on ``host``, and only
    if it has one (an operation that changes nothing stays without a command)."""
    data = state.ops[host][op_hash]
    commands = data.command_generator

    def generate() -> Iterator[Any]:
        produced = commands()
        first = next(produced, None)
        if first is None:
            return
        yield StringCommand(command())
        yield first
        yield from produced

    data.command_generator = generate


def commands(state: State, host: Host, op_hash: str) -> Iterator[Any]:
    """Return the commands an operation runs on ``host``, generated now (at execute time
    pyinfra generates them again, as the operation runs)."""
    return state.ops[host][op_hash].command_generator()


def replace_commands(
    state: State, host: Host, op_hash: str, generate: Callable[[], Iterator[Any]]
) -> None:
    """Make an operation run the commands ``generate()`` yields on ``host``."""
    state.ops[host][op_hash].command_generator = generate


def set_timeout(state: State, host: Host, op_hash: str, seconds: int) -> None:
    """Set an operation's time limit (``_timeout``, for each of its commands) on ``host``."""
    data = state.ops[host][op_hash]
    data.global_arguments = {**data.global_arguments, "_timeout": seconds}


def will_change(state: State, host: Host, op_hash: str) -> bool:
    """Return whether an operation, as planned, would run any command on ``host``."""
    return state.ops[host][op_hash].operation_meta.will_change


@contextmanager
def op_context_kept(host: Host) -> Iterator[None]:
    """Keep the host's record of the operation it runs across the block, in which other
    operations' command generators run (each sets that record, and clears it when done)."""
    kept = (
        host.in_op,
        host.current_op_hash,
        host.current_op_global_arguments,
        host.current_op_deploy_data,
    )
    try:
        yield
    finally:
        (
            host.in_op,
            host.current_op_hash,
            host.current_op_global_arguments,
            host.current_op_deploy_data,
        ) = kept


@contextmanager
def keyed(host: Host, key: str) -> Iterator[None]:
    """Make the operations added inside the block one operation across pods per ``key``.

    pyinfra names an operation by where it is called (file, line, place in a loop), and pods
    share one operation per call site, with the names of all of them. An operation called in a
    loop over items that differ by pod (the ``files`` of each pod) would then carry another
    pod's item in its name. Keyed, each item is an operation of its own, named by its item, as
    ``host.loop`` keys a loop by its index.
    """
    host.loop_position.append(zlib.crc32(key.encode("utf-8", "surrogateescape")))
    try:
        yield
    finally:
        host.loop_position.pop()


def _operation_order(state: State) -> list[int]:
    """Return what pyinfra's ``get_operation_order_from_stack`` returns, called where it is.

    pyinfra orders an operation by the line numbers of the deploy code that called it. It
    reads them with ``inspect.stack()``, which loads the source lines of every frame and
    searches ``sys.modules`` for each: about 10 ms an operation, a second of CPU for a
    check of 24 pods. The frames' own code and line numbers give the same list.
    """
    frames = []
    # the caller, as pyinfra's own frame is skipped anyway
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    start = 0
    if state.current_deploy_filename:
        for start, frame in enumerate(frames):  # noqa: B007 - the index is what is wanted
            if frame.f_code.co_filename == state.current_deploy_filename:
                break
    order = [state.current_op_file_number] if pyinfra.is_cli else []
    for frame in frames[start:]:
        if not frame.f_code.co_filename.startswith(util.PYINFRA_INSTALL_DIR):
            order.append(frame.f_lineno)
    return order


@functools.cache
def _originals() -> dict[str, Callable[..., Any]]:
    """Return the pyinfra functions ``plan_faster`` replaces, as pyinfra has them."""
    return {
        "get_operation_order_from_stack": api_operation.get_operation_order_from_stack,
        "all_global_arguments": arguments.all_global_arguments,
        "pop_global_arguments": arguments.pop_global_arguments,
    }


@functools.cache
def _global_argument_types() -> tuple[tuple[str, type], ...]:
    return tuple(_originals()["all_global_arguments"]())


def _all_global_arguments() -> list[tuple[str, type]]:
    """Return pyinfra's global arguments and their types, which pyinfra computes again with
    ``typing.get_type_hints`` for every operation and fact (about 1 ms each)."""
    return list(_global_argument_types())


class _MergedData:
    """A pod's host data as ``pop_global_arguments`` reads it: each key from one dict of
    every layer merged (``HostData.dict``, the first layer that has a key winning, as a
    lookup does), a copy of its value as a lookup returns."""

    __slots__ = ("_merged",)

    def __init__(self, data: Any) -> None:
        self._merged: dict[str, Any] = data.dict()

    def __getattr__(self, key: str) -> Any:
        try:
            return copy.copy(self._merged[key])
        except KeyError:
            raise AttributeError(key) from None


class _ArgumentsHost:
    """What ``pop_global_arguments`` reads of a host: its data and its deploy's arguments."""

    __slots__ = ("data", "current_deploy_kwargs")

    def __init__(self, host: Host) -> None:
        self.data = _MergedData(host.data)
        self.current_deploy_kwargs = host.current_deploy_kwargs


def _pop_global_arguments(state: State, host: Host, kwargs: dict[str, Any]) -> Any:
    """Return what pyinfra's ``pop_global_arguments`` returns, popping the same ``kwargs``.

    pyinfra looks each of its 32 global arguments up in the host's data, every layer of it
    in turn, each absent key an exception caught per layer: about 6 µs a key, 5 ms of
    planning a pod (a check's 31 operations and facts). One merged dict a call answers them,
    for podstate's pods; any other host is pyinfra's own to read (``scope``).
    """
    pop = _originals()["pop_global_arguments"]
    return pop(state, _ArgumentsHost(host) if scope.ours(host) else host, kwargs)


def plan_faster() -> None:
    """Replace three pyinfra functions that planning calls for every operation with ones that
    return the same values without pyinfra's cost (``_operation_order``,
    ``_all_global_arguments``, ``_pop_global_arguments``): a check of 24 pods takes over a
    second less CPU, and a fleet's planning runs on one core. Verifies the installed pyinfra
    first (``verify``).

    What a user's deploy file or pyinfra's API sees stays pyinfra's: the order and the list
    of global arguments are pyinfra's own values, for any host, made another way
    (tests/test_pyinfra_api.py compares them); the order cannot hand other hosts to
    pyinfra's function, whose value would then count the line of the function between (an
    operation's hash is made of it). Popping the arguments reads the host through a
    stand-in, so only podstate's pods are read so (``scope``); pyinfra's own function reads
    any other host."""
    verify()
    _originals()
    api_operation.get_operation_order_from_stack = _operation_order  # type: ignore[attr-defined]
    arguments.all_global_arguments = _all_global_arguments
    facts.all_global_arguments = _all_global_arguments
    for module in (arguments, api_operation, facts, api_deploy):
        module.pop_global_arguments = _pop_global_arguments  # type: ignore[attr-defined]
