"""The watch's last look before it stops an idle pod: over SSH, it takes the pod lock (the
one every apply takes: podstate.run.lock), reads again on the pod, by the clock the probe
keeps there (scripts/work.sh, podstate.facts.work), that no work happened since the idle
period began, and holds the lock while the provider's stop request is sent.

One command does it all: under the lock, it prints what work.sh reads, then a line of its
own, then waits on its standard input, which the watch closes once the stop request is
answered; the lock goes with the command. Should the watch die, its connection closes,
the command's input with it, and the lock is released; should the connection hang, the
lock expires after its time limit. Another run's lock is not waited for: the pod is busy.
Whatever cannot be done or read (a connection, the lock, the clock, a process) is a reason
not to stop: unknown is never idle.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from paramiko import SSHException
from pyinfra.api import BaseStateCallback

from podstate import settings
from podstate.facts import work
from podstate.pyinfra_api import cli, connect, execute
from podstate.run import lock
from podstate.shell import script

READ = "podstate.read"  # the line after work.sh's: the lock is held, the reading whole


def command() -> str:
    """Return the command that reads the pod's work under its lock, then holds the lock
    until its standard input closes."""
    inner = [
        "export LC_ALL=C",
        script("enc.sh"),
        *work.probe_lines(),
        f"echo {READ}",
        "read -r _ || :",
    ]
    return lock.guarded("\n".join(inner), release=True, wait=0)


def verdict(lines: list[str], after: float) -> str | None:
    """Return why the pod is not idle by the lines ``command`` printed under the lock (its
    work lines, up to ``READ``), None when it is: no work, nothing unread, and an idle period
    at least ``after`` seconds old by the pod's clock."""
    try:
        found = work.parse(lines)
    except (ValueError, IndexError) as e:
        return f"its work could not be read again under the pod lock ({e})"
    if found.busy:
        return f"in use, read again under the pod lock: {work.describe(found.busy[0])}"
    for process in found.unread:
        return f"what {process.command} (pid {process.pid}) does cannot be read"
    if found.age is None:
        return "its idle clock could not be read again under the pod lock"
    if found.age < after:
        return f"its idle period began again {found.age:g} s ago, read under the pod lock"
    return None


class _Failed(BaseStateCallback):
    """Keeps why the connection failed, in pyinfra's one line (podstate.pyinfra_api.connect)."""

    why: str | None = None

    # pyinfra's API: declared static, called on the instance
    def host_connect_error(self, state: Any, host: Any, error: Any) -> None:  # type: ignore[override]
        self.why = str(error)


@contextmanager
def still_idle(name: str, data: dict[str, Any], after: float) -> Iterator[str | None]:
    """Within the block, hold the lock of the pod ``name`` (host data ``data``) if it is
    still idle past ``after`` seconds by its own clock: the block gets None; else it gets
    why not (busy, in use, unreadable, unreachable), and no lock is held."""
    connect.quiet()
    state, config = cli.new_state(settings.CONNECT_TIMEOUT)
    inventory = cli.inventory_of([(name, data)])
    failed = _Failed()
    cli.connect(state, inventory, config, None, failed)
    host = inventory.get_host(name)
    try:
        if not host.connected:
            yield f"the pod lock could not be taken: {failed.why or 'no connection'}"
            return
        try:
            channel = execute.start_command(state, host, command(), {})
            channel.settimeout(settings.COMMAND_TIMEOUT)
            lines = _until_read(channel)
        except (OSError, TimeoutError, SSHException, EOFError) as e:
            yield f"the pod lock could not be taken: {e or type(e).__name__}"
            return
        try:
            if lines[-1:] != [READ]:
                yield _refused(lines)
            else:
                yield verdict(lines[:-1], after)
        finally:
            try:
                channel.shutdown_write()  # the command ends, and lets go of the lock
                channel.recv_exit_status()
            except (OSError, TimeoutError, SSHException, EOFError):
                pass
            channel.close()
    finally:
        cli.disconnect(state)
        execute.hang_up(host)


def _until_read(channel: Any) -> list[str]:
    """Return the lines the command printed, up to and with ``READ``, or all of them until
    it ended (when it could not take the lock or read)."""
    lines: list[str] = []
    stream = channel.makefile("r")
    for raw in stream:
        line = raw.rstrip("\n")
        lines.append(line)
        if line == READ:
            break
    return lines


def _refused(lines: list[str]) -> str:
    """Return why the command did not read under the lock, from its last line (lock.sh's:
    another run holds the lock, whose owner it names, or the lock cannot be made)."""
    said = next((line for line in reversed(lines) if line.strip()), "the pod gave no answer")
    said = said.removeprefix("podstate: ").removeprefix("skipped: ")
    if said.startswith("another podstate run holds this pod"):
        return "busy: " + said.split("; ")[0]
    return f"the pod lock could not be taken: {said}"
