"""Connecting to pods: every failure is one line naming its cause, never a traceback.

pyinfra's SSH connector turns most failures into a ``ConnectError`` (one line, logged under
the pod's name), but not all: a key file that does not exist or cannot be read raises a
plain ``PyinfraError`` inside the connecting greenlet, which gevent prints as a traceback
before pyinfra reports ``could not connect``; and paramiko logs, from its transport thread,
the traceback of every failure it then raises to its caller (an SSH banner that never
comes, for one). ``quiet()`` stops both where they start, for podstate's pods alone (any
other host connects, fails and logs as pyinfra and paramiko make it: ``scope``); ``cause()``
names what happened in podstate's words, in pyinfra's own line for the pod and in the
check's reports.
"""

from __future__ import annotations

import errno
import functools
import logging
import socket
import threading
import weakref
from collections.abc import Callable
from typing import Any

from paramiko.ssh_exception import AuthenticationException, NoValidConnectionsError
from pyinfra.api.exceptions import ConnectError
from pyinfra.api.host import HostData
from pyinfra.connectors.ssh import SSHConnector

from podstate.pyinfra_api import hostkeys, scope

_TRANSPORT_LOG = "paramiko.transport"
# The connectors of podstate's pods that connected or tried to: their transports' errors go
# unlogged (_RaisedToCaller)
_OURS: weakref.WeakSet[SSHConnector] = weakref.WeakSet()


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


def _connect_error_only(
    connect: Callable[[SSHConnector], None],
) -> Callable[[SSHConnector], None]:
    """Return ``connect`` (the SSH connector's) raising, for every failure to connect to one
    of podstate's pods, a ConnectError whose text is ``cause()``'s: pyinfra reports it for
    its pod as it reports the others (one line, the ``host_connect_error`` callback),
    instead of gevent printing the connecting greenlet's traceback for the failures pyinfra
    leaves uncaught. Any other host connects with ``connect`` as it is."""

    @functools.wraps(connect)
    def connect_or_connect_error(self: SSHConnector) -> None:
        if not scope.ours(self.host):
            connect(self)
            return
        _OURS.add(self)
        try:
            connect(self)
        except Exception as e:  # ConnectError, a missing or unreadable key, the unforeseen
            host = self.host
            timeout = self.state.config.CONNECT_TIMEOUT
            raise ConnectError(cause(e, host.data, host.name, timeout)) from e

    connect_or_connect_error.podstate = True  # type: ignore[attr-defined]
    return connect_or_connect_error


def _ours_transport() -> bool:
    """Return whether the running thread is the transport of a connection to one of
    podstate's pods (paramiko's SSH client makes its transport, a thread, as it connects)."""
    thread = threading.current_thread()
    for connector in list(_OURS):
        client = connector.client
        if client is not None and client.get_transport() is thread:
            return True
    return False


class _RaisedToCaller(logging.Filter):
    """Drops the errors paramiko's transport thread logs for podstate's pods: each is the
    exception it hands to the caller (``saved_exception``), which pyinfra reports as the
    pod's one line. Kept when logging is at DEBUG (pyinfra's ``--debug-all``), for whoever
    is debugging paramiko, and for every other connection."""

    podstate = True

    def filter(self, record: logging.LogRecord) -> bool:
        return (
            record.levelno < logging.ERROR
            or logging.getLogger().level == logging.DEBUG
            or not _ours_transport()
        )


def quiet() -> None:
    """Make every failure to connect to one of podstate's pods one line (see the module's
    docstring); idempotent.

    Called by the inventory (so a plain ``pyinfra`` run gets it too) and by the check."""
    if not getattr(SSHConnector.connect, "podstate", False):
        SSHConnector.connect = _connect_error_only(SSHConnector.connect)  # type: ignore[method-assign,assignment]
    transport = logging.getLogger(_TRANSPORT_LOG)
    if not any(getattr(f, "podstate", False) for f in transport.filters):
        transport.addFilter(_RaisedToCaller())


def _chain(error: BaseException) -> list[BaseException]:
    """Return ``error`` and the exceptions it was raised from or during, outermost first."""
    found: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and link not in found:
        found.append(link)
        link = link.__cause__ or link.__context__
    return found


def cause(error: BaseException, data: HostData | dict[str, Any], name: str, timeout: float) -> str:
    """Return why connecting to the pod ``name`` (host data ``data``) failed with ``error``
    (pyinfra's ConnectError, or what it was raised from), in one line that names the cause:
    no such key file, key refused, a new host key not among the fingerprints that vouch for
    it (``hostkeys``), a host key strict checking does not know, name not
    resolved, connection refused, no SSH banner, timed out; else pyinfra's own line (a
    changed host key's among them, which the check words from what it knows of the pod).
    ``timeout`` is the connect time limit in seconds; the banner's, where the host data sets
    one (podstate's does), is read from there."""
    address = data.get("ssh_hostname") or name
    port = int(data.get("ssh_port") or 22)
    where = f"{address}:{port}"
    connect_kwargs = data.get("ssh_paramiko_connect_kwargs") or {}
    banner = connect_kwargs.get("banner_timeout") or timeout
    chain = _chain(error)
    kinds = tuple(type(e) for e in chain)
    texts = [_one_line(e) for e in chain]
    for text in texts:
        if text.startswith("No such private key file: "):
            return f"no such key file: {text.removeprefix('No such private key file: ')}"
    if any(issubclass(k, AuthenticationException) for k in kinds):
        key = data.get("ssh_key")
        which = f"the key {key}" if key else "any key offered (ssh_key is not set)"
        user = data.get("ssh_user")
        return f"key refused: {where} did not accept {which}" + (f" for {user}" if user else "")
    for text in texts:
        if hostkeys.refused_by_fingerprints(text):
            return text
    if any(text.startswith("StrictPolicy: No host key for") for text in texts):
        known = data.get("ssh_known_hosts_file") or "~/.ssh/known_hosts"
        return (
            f"host key refused: no key for {where} in {known}, and "
            "ssh_strict_host_key_checking refuses a key it does not know"
        )
    if any(issubclass(k, socket.gaierror) for k in kinds):
        return f"name not resolved: {address}"
    for e in chain:
        if isinstance(e, NoValidConnectionsError) and all(
            getattr(inner, "errno", None) == errno.ECONNREFUSED for inner in e.errors.values()
        ):
            return f"connection refused: nothing listens on {where}"
    if any(issubclass(k, ConnectionRefusedError) for k in kinds):
        return f"connection refused: nothing listens on {where}"
    if any(text.startswith("Error reading SSH protocol banner") for text in texts):
        if any(issubclass(k, (EOFError, ConnectionResetError)) for k in kinds):
            return f"no SSH banner: {where} closed the connection before sending one"
        if any(issubclass(k, TimeoutError) for k in kinds):
            return f"no SSH banner: {where} accepted the connection but sent none in {banner:g} s"
        return f"no SSH banner: {where}: {texts[-1]}"
    if any(issubclass(k, TimeoutError) for k in kinds):
        return f"timed out after {timeout:g} s connecting to {where}"
    return texts[0]
