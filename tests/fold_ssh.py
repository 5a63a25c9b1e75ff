"""A real SSH connection to this machine's own shell, in this process: paramiko's client and
server over a socket pair, so a fold's reading and sending (``podstate.run.fold.converse``)
meet real channels, real flow control (a window that fills when the command does not read
its stdin) and real exit statuses, without a sandbox pod.

Each command runs as ``SHELL -c COMMAND`` (dash or bash), stdout and stderr in one stream, in a
session of its own; a command whose channel the client closes is killed, as nothing else
would end a step the fold gave up on here. A command killed by a signal gets no exit status
(sshd sends "exit-signal", which paramiko does not read: -1).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import paramiko


class _Server(paramiko.ServerInterface):
    """Accepts anyone and runs each exec request's command with ``shell``."""

    def __init__(self, shell: str) -> None:
        self.shell = shell
        self.started: list[subprocess.Popen] = []

    def get_allowed_auths(self, username: str) -> str:
        return "none"

    def check_auth_none(self, username: str) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        process = subprocess.Popen(
            [self.shell, "-c", command.decode("utf-8", "surrogateescape")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started.append(process)
        threading.Thread(target=_stdin, args=(channel, process), daemon=True).start()
        threading.Thread(target=_stdout, args=(channel, process), daemon=True).start()
        return True


def _stdin(channel: paramiko.Channel, process: subprocess.Popen) -> None:
    """Copy the channel's data to the command's stdin, which ends with it. A command that does
    not read its stdin stops this, and so the window the client may send in fills."""
    assert process.stdin is not None
    try:
        while data := channel.recv(65536):
            process.stdin.write(data)
            process.stdin.flush()
    except OSError:
        pass
    finally:
        try:
            process.stdin.close()
        except OSError:
            pass


def _stdout(channel: paramiko.Channel, process: subprocess.Popen) -> None:
    """Copy the command's output to the channel; then send its exit status (none if a signal
    ended it) and close. A channel the client closed first kills the command."""
    assert process.stdout is not None
    try:
        while data := os.read(process.stdout.fileno(), 65536):
            channel.sendall(data)
    except OSError:
        _kill(process)
    status = process.wait()
    try:
        if status >= 0:
            channel.send_exit_status(status)
        channel.close()
    except (OSError, EOFError, paramiko.SSHException):
        pass


def _kill(process: subprocess.Popen) -> None:
    """End ``process`` and its session's other processes (started by the test, by group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass


class Connection:
    """The client side: ``open(command)`` starts a command and returns its channel."""

    def __init__(self, client: paramiko.Transport, server: _Server) -> None:
        self.client = client
        self.server = server

    def open(self, command: str) -> paramiko.Channel:
        channel = self.client.open_session()
        channel.set_combine_stderr(True)
        channel.exec_command(command)
        return channel

    def pid(self) -> int:
        """Return the process id of the shell of the last command started."""
        return self.server.started[-1].pid


@contextmanager
def connection(shell: str) -> Iterator[Connection]:
    """Yield a connection whose commands run with ``shell``; on leaving, close it and kill
    what its commands left running."""
    near, far = socket.socketpair()
    server = _Server(shell)
    host = paramiko.Transport(far)
    host.add_server_key(paramiko.ECDSAKey.generate())
    started = threading.Thread(target=host.start_server, kwargs={"server": server})
    started.start()
    client = paramiko.Transport(near)
    client.start_client()
    started.join()
    client.auth_none("root")
    try:
        yield Connection(client, server)
    finally:
        client.close()
        host.close()
        for process in server.started:
            _kill(process)
            process.wait()
