"""Commands run as pyinfra runs them, and their output printed as pyinfra prints it."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, cast

import click
from paramiko import Channel, SSHClient, SSHException, Transport
from pyinfra import context, logger
from pyinfra.api import Host, State, StringCommand, arguments, util
from pyinfra.connectors import util as connector_util
from pyinfra.connectors.ssh import SSHConnector

RUN_ONLY = ("_timeout", "_stdin", "_get_pty", "_success_exit_codes")  # not for the command line
Lines = list[tuple[str, str]]  # a command's output: (stream, line), "stdout" or "stderr"


def connector_arguments(
    host: Host, state: State | None = None, op_hash: str = ""
) -> dict[str, Any]:
    """Return the connector arguments (``_sudo``, ``_env``...) of the operation ``op_hash``
    (in ``state``), or by default of the one ``host`` runs now, to run a command as it would."""
    given = (
        state.ops[host][op_hash].global_arguments
        if state is not None
        else host.current_op_global_arguments
    )
    return {k: v for k, v in (given or {}).items() if k in arguments.CONNECTOR_ARGUMENT_KEYS}


def start_command(state: State, host: Host, command: str, arguments: dict[str, Any]) -> Channel:
    """Start ``command`` on ``host`` as pyinfra would run it with the connector ``arguments``
    (``_sudo``, ``_env``...); return its SSH channel, stdout and stderr in one stream, to read
    as it runs (pyinfra's ``run_shell_command`` returns the output only once it is done)."""
    wrapped = connector_util.make_unix_command_for_host(
        state,
        host,
        StringCommand(command),
        **{k: v for k, v in arguments.items() if k not in RUN_ONLY},
    )
    connector = cast(SSHConnector, host.connector)  # a pod's: pyinfra's SSH connector
    client = cast(SSHClient, connector.client)  # connected, so its client and transport exist
    channel = cast(Transport, client.get_transport()).open_session()
    channel.set_combine_stderr(True)
    channel.exec_command(wrapped.get_raw_value())
    return channel


def hang_up(host: Host) -> None:
    """Close ``host``'s SSH connection now (pyinfra's disconnect leaves it open until the
    process ends: a long-lived process would keep a session on the pod)."""
    client = getattr(host.connector, "client", None)
    if client is not None:
        client.close()


def run_shell(
    state: State, host: Host, command: str, arguments: dict[str, Any], output: bool = False
) -> tuple[bool, Lines]:
    """Run ``command`` on ``host`` with the connector ``arguments``, showing it (and with
    ``output`` what it prints) as pyinfra's verbosity asks; return whether it succeeded and
    its output lines."""
    status, printed = host.run_shell_command(
        StringCommand(command),
        print_input=state.print_input,
        **({"print_output": state.print_output} if output else {}),
        **arguments,
    )
    return status, [(line.buffer_name, line.line) for line in printed]


def print_failed_output(host: Host, lines: Lines) -> None:
    """Print a failed command's output as pyinfra does (each line an error for the pod)."""
    combined = [connector_util.OutputLine(stream, line) for stream, line in lines]
    util.print_host_combined_output(host, connector_util.CommandOutput(combined))


def echoer(state: State, host: Host) -> Callable[[str], None] | None:
    """Return what prints each line a command prints on ``host`` as it comes, where pyinfra
    prints output (``-vv``); None where it does not."""
    if not state.print_output:
        return None
    return lambda line: click.echo(f"{host.print_prefix}{line}", err=True)


def log(host: Host, text: str, color: str, error: bool = False) -> None:
    """Log ``text`` for ``host`` in ``color``, a warning (or an error), as pyinfra does."""
    host.log_styled(text, fg=color, log_func=logger.error if error else logger.warning)


def labelled(host: Host, label: str, color: str, bold: bool = False) -> str:
    """Return the start of a log line for ``host``: its prefix and ``label`` styled."""
    return f"{host.print_prefix}{util.format_text(label, color, bold=bold)}"


def upload_empty(host: Host, path: str) -> bool:
    """Upload an empty file to ``path`` on ``host`` over SFTP (relative to the SSH user's
    home), as the SSH user: through no login shell, so it works where a command cannot run.
    Returns whether it was written."""
    try:
        return bool(host.connector.put_file(io.BytesIO(b""), path))
    except (OSError, SSHException):
        return False


def fail(state: State, host: Host, text: str) -> None:
    """Fail ``host`` for the rest of this run with ``text`` as its error line, as pyinfra
    fails a pod whose command failed (the pod itself, not pyinfra's ``host`` proxy, which
    names another pod once this one is planned)."""
    log(host, text, "red", error=True)
    current: Callable[[], Host] = context.ctx_host.get  # unannotated: the host planned now
    fail_hosts: Callable[[set[Host]], None] = state.fail_hosts  # unannotated
    fail_hosts({current() if host is context.host else host})


def try_shell(state: State, host: Host, command: str) -> tuple[bool, Lines] | None:
    """Return ``run_shell``'s answer for ``command`` run as the SSH user; None when the
    connection failed under it (a pod that died or hangs), which pyinfra reports itself at
    its next command."""
    try:
        return run_shell(state, host, command, {"_timeout": 30})
    except (OSError, TimeoutError, SSHException, EOFError):
        return None
