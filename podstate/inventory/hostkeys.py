"""Host keys of RunPod pods, trusted per pod id and renewed only when RunPod says it restarted.

RunPod makes new host keys at every container start and reuses public IPs and ports, so a
known_hosts file keyed by address breaks on the first restart, and turning host-key checking
off gives up on noticing an interception. podstate keeps its own store instead, in
``PODSTATE_HOSTKEYS`` (default ``~/.local/state/podstate/hostkeys``), one pod per pair of
files named after the RunPod pod id:

``<id>.known_hosts``
    An ordinary known_hosts file, handed to pyinfra as the pod's ``ssh_known_hosts_file``;
    paramiko verifies the pod's key against it and, with ``accept-new``, records a new one.
``<id>.json``
    ``{"pod_id", "name", "address", "recorded_at"}``: ``recorded_at`` is the RunPod
    ``startedAt`` of the container whose key the known_hosts file holds.
``<id>.known_hosts.old``
    The previous key, moved aside when the pod restarted.

The store is plain files, so CI can carry it from run to run (a cache restored before the
check and saved after it) or a team can commit it to its repository.

The rules, applied when the inventory is built (before any connection):

* no key stored yet: accept the key the pod presents if its fingerprint is among those its
  container's start printed to RunPod's log (``keylog``; ``vouched``), and refuse any other
  before authenticating; where the log shows none, trust on first use
  (``ssh_strict_host_key_checking: accept-new``), or, with ``PODSTATE_STRICT_HOST_KEYS=1``
  (or ``podstate check --strict-host-keys``, for one check), refuse the pod: a team that
  pre-seeds the store wants no key it has not reviewed;
* RunPod's ``startedAt`` is later than ``recorded_at``: the container restarted since its key
  was recorded, so its old key is stale; it is moved aside and the new one accepted as a
  first key is (the log's fingerprints, else on trust, which strict host keys refuse);
* otherwise: the stored key must match (``yes``). A different key from a container that has
  not restarted is refused for that pod only; pyinfra fails it with "REMOTE HOST
  IDENTIFICATION HAS CHANGED" and the other pods go on.

Why ``recorded_at`` is a ``startedAt`` and not a clock reading: paramiko writes the key
during the connection, without telling podstate. The key it records comes from the container
running at that moment, which is the one RunPod reported as started at ``startedAt`` when the
inventory was built a moment before. Recording that value at inventory time, and comparing
later ``startedAt`` values with it, compares two timestamps from RunPod's clock only, so a
wrong local clock can never make a changed key acceptable. If the pod restarted in the short
gap between listing and connecting, the key recorded is newer than ``recorded_at`` says; the
next run then sees a later ``startedAt`` and renews it, which is what a restart does anyway.
A pod without a ``startedAt`` records none, and a stored key with no ``recorded_at`` is never
renewed automatically: delete the pod's files to trust its next key.

pyinfra's advice on a changed key is rewritten to name the store (``hostkey_hints``).
After the connections, ``outcome`` says what the run did with each pod's key (trusted it on
first use, re-keyed it after a restart, kept it, refused it), for the check's reports.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from podstate.pyinfra_api import cli as pyinfra_cli
from podstate.pyinfra_api import hostkeys as policy

DEFAULT_DIR = Path("~/.local/state/podstate/hostkeys")

NEW = "new"  # no key stored: take the one the log vouches for, else trust on first use
RESTARTED = "restarted"  # the pod restarted since its key was recorded: take the new one
TRUSTED = "trusted"  # the stored key must match
UNKNOWN = "unknown"  # no key stored and strict host keys: refuse it, record nothing

STRICT_ENV = "PODSTATE_STRICT_HOST_KEYS"

# What a run did with a pod's key (``outcome``), as the check's reports say it.
VERIFIED = "verified"  # a first key, or a new one after a restart, matched RunPod's log
FIRST_USE = "first-use"  # no key was stored; the key the pod showed now is (unverified)
REKEYED = "rekeyed"  # RunPod reported a restart; the old key was set aside, the new one stored
KNOWN = "known"  # the stored key was kept
REFUSED = "refused"  # the pod's key was refused: changed without a restart, or strict and new
NOT_SEEN = "none"  # no key stored, and none recorded: the pod was not reached

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")  # whole ids only: fullmatch


@dataclass(frozen=True)
class HostKeyTrust:
    """What podstate trusts for one pod, and the pyinfra host data that enforces it."""

    pod_id: str
    name: str
    address: str  # the known_hosts host pattern: "host" on port 22, else "[host]:port"
    known_hosts: Path
    state: str  # NEW, RESTARTED or TRUSTED
    recorded_at: str | None  # startedAt of the container whose key is stored
    started_at: str | None  # startedAt RunPod reports now
    fingerprints: tuple[str, ...] = ()  # what RunPod's log shows for this container's keys
    unverified: str | None = None  # why the log vouches for no key (NEW, RESTARTED, UNKNOWN)

    @property
    def strictness(self) -> str:
        """Return pyinfra's ``ssh_strict_host_key_checking`` value for this pod.

        ``accept-new`` lets paramiko record the key when none is stored (new, or moved aside
        after a restart); ``yes`` makes it refuse any key but the stored one.
        """
        return "yes" if self.state in (TRUSTED, UNKNOWN) else "accept-new"

    def host_data(self) -> dict[str, Any]:
        """Return the pyinfra host data that points paramiko at this pod's known_hosts, and
        ``host_key_trust`` (the state planned), ``host_key_fingerprints`` (the keys a new one
        must be among: ``pyinfra_api.hostkeys`` refuses any other) and
        ``host_key_unverified``, which ``outcome`` reads after connecting."""
        return {
            "ssh_known_hosts_file": str(self.known_hosts),
            "ssh_strict_host_key_checking": self.strictness,
            "host_key_trust": self.state,
            "host_key_fingerprints": list(self.fingerprints),
            "host_key_unverified": self.unverified,
        }

    @property
    def needs_log(self) -> bool:
        """Return whether the pod is about to take a key it has none stored for: RunPod's log
        should say which (``vouched``)."""
        return self.state in (NEW, RESTARTED, UNKNOWN)


def strict_from_env() -> bool:
    """Return whether ``PODSTATE_STRICT_HOST_KEYS`` asks to refuse keys seen for the first time
    (``1``, ``true`` or ``yes``), for an apply or a check; ``podstate check --strict-host-keys``
    asks the same for one check without it (``fleet.strict_host_keys``)."""
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")


def store_dir() -> Path:
    """Return the host-key store: ``PODSTATE_HOSTKEYS``, else ~/.local/state/podstate/hostkeys."""
    return Path(os.environ.get("PODSTATE_HOSTKEYS") or DEFAULT_DIR).expanduser()


def known_hosts_pattern(host: str, port: int) -> str:
    """Return the host field paramiko looks a server up by (``[host]:port`` unless port 22)."""
    return host if port == 22 else f"[{host}]:{port}"


def parse_time(value: str) -> datetime:
    """Return an ISO 8601 timestamp as an aware datetime (UTC when it names no zone).

    Raises ValueError for anything else, so callers can word the error.
    """
    parsed = datetime.fromisoformat(value.strip())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def plan(
    pod_id: str,
    name: str,
    host: str,
    port: int,
    started_at: str | None,
    directory: Path | None = None,
    strict: bool | None = None,
) -> HostKeyTrust:
    """Return what to trust for a pod, from its stored files and RunPod's ``startedAt``.

    Reads only; ``record`` makes the store match. Kept apart so ``podstate inventory`` can
    show the fleet without touching the store. ``strict`` (default: ``strict_from_env``)
    makes a pod with no stored key UNKNOWN, refused, instead of NEW, trusted on first use.
    """
    if strict is None:
        strict = strict_from_env()
    root = directory or store_dir()
    stem = _file_stem(pod_id)
    known_hosts = root / f"{stem}.known_hosts"
    recorded_at = _read_meta(root / f"{stem}.json").get("recorded_at")
    if not isinstance(recorded_at, str):
        recorded_at = None
    if not _entries(known_hosts):
        state = UNKNOWN if strict else NEW
    elif _later(started_at, recorded_at):
        state = RESTARTED
    else:
        state = TRUSTED
    return HostKeyTrust(
        pod_id=pod_id,
        name=name,
        address=known_hosts_pattern(host, port),
        known_hosts=known_hosts,
        state=state,
        recorded_at=recorded_at,
        started_at=started_at,
    )


def vouched(
    trust: HostKeyTrust,
    fingerprints: tuple[str, ...],
    why: str | None,
    strict: bool | None = None,
) -> HostKeyTrust:
    """Return ``trust`` with what the container's log shows of its keys (``keylog``).

    With fingerprints, a pod that had no key stored (UNKNOWN under strict host keys too) is
    NEW: its key is taken if it is among them. Without, ``why`` is kept for the reports and,
    under strict host keys, a restarted pod is UNKNOWN as a new one is: nothing vouches
    for its new key.
    """
    if not trust.needs_log:
        return trust
    if strict is None:
        strict = strict_from_env()
    if fingerprints:
        state = NEW if trust.state == UNKNOWN else trust.state
        return dataclasses.replace(trust, state=state, fingerprints=fingerprints, unverified=None)
    state = UNKNOWN if strict else trust.state
    return dataclasses.replace(trust, state=state, fingerprints=(), unverified=why)


def record(trust: HostKeyTrust) -> None:
    """Make the store match ``trust`` before pyinfra connects.

    Creates the store (mode 0700) and the pod's known_hosts file (so paramiko has one to
    read and append to); moves a stale key aside on RESTARTED; records ``startedAt`` as
    ``recorded_at`` for NEW and RESTARTED; and rewrites the host field of stored entries to
    the pod's current address, because the key belongs to the pod, not to the IP and port
    RunPod happens to give it.
    """
    root = trust.known_hosts.parent
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if trust.state == RESTARTED and _entries(trust.known_hosts):
        # another run recording the pod at once may have moved it aside (and left an empty
        # file, which must not replace the old key): not an error
        with contextlib.suppress(FileNotFoundError):
            trust.known_hosts.replace(trust.known_hosts.with_name(trust.known_hosts.name + ".old"))
    if trust.state in (NEW, RESTARTED):
        meta = {
            "pod_id": trust.pod_id,
            "name": trust.name,
            "address": trust.address,
            "recorded_at": trust.started_at,
        }
        _write_atomic(trust.known_hosts.with_suffix(".json"), json.dumps(meta, indent=2) + "\n")
    if not trust.known_hosts.exists():
        # created if absent, never truncated: a key another run's paramiko has just written stays
        os.close(os.open(trust.known_hosts, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    else:
        lines = _entries(trust.known_hosts)
        moved = [
            line + "\n"
            if line.startswith("@")
            else f"{trust.address} {' '.join(line.split()[1:])}\n"
            for line in lines
        ]
        if moved != [line + "\n" for line in lines]:
            _write_atomic(trust.known_hosts, "".join(moved))
    # pyinfra parses each known_hosts file once per process; after the store changed, a
    # second run in the same process (``podstate check`` called twice) must read it again.
    pyinfra_cli.forget_known_hosts()


def fingerprint(path: Path) -> str | None:
    """Return the OpenSSH SHA256 fingerprint (``SHA256:...``, as ``ssh-keygen -l`` prints it)
    of the first key in a known_hosts file; None when it holds none.

    The reports show fingerprints, never keys: short enough to compare with what a pod's
    console shows, and all a reviewer needs.
    """
    for line in _entries(path):
        fields = line.split()
        if line.startswith("@") or len(fields) < 3:
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except (binascii.Error, ValueError):
            continue
        digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"
    return None


def outcome(data: Any, connected: bool, error: str | None) -> dict[str, str | None] | None:
    """Return what this run did with a pod's host key, from its host data after connecting.

    ``data`` is the pod's pyinfra host data (``host_data`` of its trust, read with ``.get``);
    ``connected`` and ``error`` say how the connection went. The result, for the reports:
    ``{"trust", "fingerprint", "old_fingerprint"?, "reason"?, "unverified"?}`` with
    ``trust`` one of VERIFIED (a new key among those RunPod's log shows), FIRST_USE,
    REKEYED (both with ``unverified``: why the log vouched for none), KNOWN (also a
    restarted pod that showed its stored key again), REFUSED (``reason`` says why),
    NOT_SEEN; ``old_fingerprint`` is the key set aside at a restart; ``fingerprint`` is
    the key stored now. None when podstate keeps no key for the pod (a pods file
    inventory: ~/.ssh/known_hosts applies).

    Read from the store's files, because paramiko records a key without telling podstate.
    """
    state = data.get("host_key_trust")
    known_hosts = data.get("ssh_known_hosts_file")
    if state not in (NEW, RESTARTED, TRUSTED, UNKNOWN) or not known_hosts:
        return None
    path = Path(known_hosts)
    stored = fingerprint(path)
    vouched_for = data.get("host_key_fingerprints") or []
    result: dict[str, str | None] = {"trust": KNOWN, "fingerprint": stored}
    if not connected and policy.refused_by_fingerprints(error):
        result["trust"] = REFUSED
        result["reason"] = (error or "").removeprefix(policy.REFUSED)
    elif state == UNKNOWN and not connected:
        why = data.get("host_key_unverified") or "RunPod's log shows no fingerprint"
        result["trust"] = REFUSED
        result["reason"] = (
            f"nothing vouches for the pod's key ({why}), and strict host keys "
            f"({STRICT_ENV}, --strict-host-keys) refuse a key they cannot verify; "
            f"add the pod's key to the store in {path.parent}"
        )
    elif state == TRUSTED and not connected and "host key" in (error or "").lower():
        result["trust"] = REFUSED
        result["reason"] = (
            "the pod's key differs from the stored one and RunPod reports no restart since it "
            f"was recorded: possibly an interception; remove {path} only if you know why"
        )
    elif state in (NEW, RESTARTED):
        old = fingerprint(path.with_name(path.name + ".old")) if state == RESTARTED else None
        if stored and old == stored:  # the pod kept its key (boot.host_keys: keep)
            return result
        if state == RESTARTED:
            result["old_fingerprint"] = old
        if not stored:
            result["trust"] = NOT_SEEN
        elif stored in vouched_for:
            result["trust"] = VERIFIED
        else:
            result["trust"] = FIRST_USE if state == NEW else REKEYED
            result["unverified"] = data.get("host_key_unverified") or "no fingerprint to compare"
    return result


def _file_stem(pod_id: str) -> str:
    """Return a file name stem for a pod id: the id itself when it is safe as a file name."""
    if _SAFE_ID.fullmatch(pod_id):
        return pod_id
    return "id-" + hashlib.sha256(pod_id.encode()).hexdigest()[:32]


def _entries(path: Path) -> list[str]:
    """Return the host-key lines of a known_hosts file ([] when there is none)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#") and len(line.split()) >= 3
    ]


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _later(started_at: str | None, recorded_at: str | None) -> bool:
    """True when both timestamps are known and ``started_at`` is strictly later."""
    if not started_at or not recorded_at:
        return False
    try:
        return parse_time(started_at) > parse_time(recorded_at)
    except ValueError:
        return False


def _write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (mode 0600), so a reader sees the old file
    or the new one, never half of one.

    Each write has a temp file of its own (``.NAME.<random>.tmp`` beside it): two runs
    recording the same pod at once each rename their own, and the last one wins whole. A
    failed write removes its temp file.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
