"""The host data keys pyinfra's SSH connector reads (``ssh_port``, ``ssh_key``, ...).

It exists so that the pods file can refuse a misspelt key (``ssh_prot``) instead of passing
it through unread: the connector's own list of the keys it reads is the one source.
"""

from __future__ import annotations

# The keys podstate sets itself: verify() checks the connector still reads each of them.
USED_KEYS = frozenset(
    "ssh_hostname ssh_port ssh_user ssh_key ssh_known_hosts_file ssh_strict_host_key_checking "
    "ssh_paramiko_connect_kwargs".split()
)


def data_keys() -> frozenset[str]:
    """Return the host data keys the SSH connector reads (``SSHConnector.data_meta``)."""
    from pyinfra.connectors.ssh import SSHConnector

    return frozenset(SSHConnector.data_meta)
