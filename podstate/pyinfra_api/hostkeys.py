"""A new host key is taken only if it is among the fingerprints something vouches for.

paramiko asks its missing-host-key policy what to do with a key that the known_hosts file
lacks, after the key exchange and before any authentication. pyinfra's SSH client makes that
policy from ``ssh_strict_host_key_checking`` (``get_missing_host_key_policy``); ``expect``
wraps it, once per process, so that for an address given fingerprints (those RunPod's log
shows for the container, or a pods file's ``host_key_fingerprints``) a key among them is
recorded as ``accept-new`` records one, whatever the policy, and any other key is refused:
an SSHException whose text starts with ``REFUSED``, before a credential or a command is
sent. Other addresses keep pyinfra's policy as it is.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import Any

from paramiko import MissingHostKeyPolicy, PKey, SSHClient, SSHException
from pyinfra.connectors.sshuserclient import client as ssh_client

REFUSED = "host key refused: "
_NOT_AMONG = "is not among the host keys"

# known_hosts address ("host", or "[host]:port") -> (fingerprints, who shows them)
_EXPECTED: dict[str, tuple[tuple[str, ...], str]] = {}


def fingerprint_of(key: PKey) -> str:
    """Return a paramiko key's OpenSSH SHA256 fingerprint, as ``ssh-keygen -l`` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def refused_by_fingerprints(error: str | None) -> bool:
    """Return whether a pod's connect error is this policy's refusal."""
    return error is not None and error.startswith(REFUSED) and _NOT_AMONG in error


class _Vouched(MissingHostKeyPolicy):
    """pyinfra's policy, but a key for an address with fingerprints must be among them."""

    def __init__(self, inner: MissingHostKeyPolicy) -> None:
        self.inner = inner

    def missing_host_key(self, client: SSHClient, hostname: str, key: PKey) -> None:
        """Record a vouched-for key, refuse another; elsewhere ask pyinfra's policy."""
        expected = _EXPECTED.get(hostname)
        if not expected:
            return self.inner.missing_host_key(client, hostname, key)
        fingerprints, shown_by = expected
        presented = fingerprint_of(key)
        if presented not in fingerprints:
            raise SSHException(
                f"{REFUSED}{hostname} presented {presented}, which {_NOT_AMONG} "
                f"{shown_by} ({', '.join(fingerprints)}): the connection may be intercepted; "
                "nothing was sent to it"
            )
        append: Callable[[SSHClient, str, PKey], None] = ssh_client.append_hostkey  # unannotated
        append(client, hostname, key)
        return None


def _vouching(original: Any) -> Any:
    def get_missing_host_key_policy(policy: Any) -> MissingHostKeyPolicy:
        return _Vouched(original(policy))

    get_missing_host_key_policy.podstate = True  # type: ignore[attr-defined]
    return get_missing_host_key_policy


def expect(pods: dict[str, tuple[tuple[str, ...], str]]) -> None:
    """Make new keys of these addresses (known_hosts form) be among their fingerprints
    (``pods``: address -> (fingerprints, who shows them, in words)); replaces the addresses
    given before. Installs the policy wrapper once per process."""
    _EXPECTED.clear()
    _EXPECTED.update({address: fp for address, fp in pods.items() if fp[0]})
    current = ssh_client.get_missing_host_key_policy
    if not getattr(current, "podstate", False):
        ssh_client.get_missing_host_key_policy = _vouching(current)
