"""The cause of a failed connection, read from the exceptions pyinfra and paramiko raise
(the real ones, raised by their own code): run against every supported pyinfra by
``make pyinfra-compat``, so a changed message shows here rather than as a vaguer error."""

import logging

import pytest
from paramiko.ssh_exception import SSHException
from pyinfra.connectors.ssh import SSHConnector
from pyinfra.connectors.ssh_util import load_key_with_certificate
from pyinfra.connectors.sshuserclient.client import StrictPolicy

from podstate.pyinfra_api import connect

DATA = {"ssh_hostname": "203.0.113.7", "ssh_port": 40122, "ssh_known_hosts_file": "k"}


def test_a_key_file_that_is_not_there():
    with pytest.raises(Exception) as raised:
        load_key_with_certificate("/nonexistent/id_x")
    assert connect.cause(raised.value, DATA, "p", 5) == "no such key file: /nonexistent/id_x"


def test_a_host_key_strict_checking_does_not_know():
    with pytest.raises(SSHException) as raised:
        StrictPolicy().missing_host_key(None, "[203.0.113.7]:40122", None)
    assert connect.cause(raised.value, DATA, "p", 5) == (
        "host key refused: no key for 203.0.113.7:40122 in k, and ssh_strict_host_key_checking "
        "refuses a key it does not know"
    )


def test_quiet_wraps_once_and_filters_paramiko_s_transport_errors():
    connect.quiet()
    wrapped = SSHConnector.connect
    connect.quiet()
    assert SSHConnector.connect is wrapped and wrapped.podstate
    transport = logging.getLogger("paramiko.transport")
    assert sum(getattr(f, "podstate", False) for f in transport.filters) == 1
    error = transport.makeRecord("paramiko.transport", logging.ERROR, "", 0, "x", (), None)
    info = transport.makeRecord("paramiko.transport", logging.INFO, "", 0, "x", (), None)
    # kept here, a thread that is no pod's transport (test_pyinfra_boundary drops a pod's)
    assert (bool(transport.filter(error)), bool(transport.filter(info))) == (True, True)
