"""Secrets: variables exported in every shell from a root-only file the profile sources.

The values are read on the control machine when the run starts (``podstate.desired.secret``) and
reach the pod only as the content of ``SECRETS_FILE``. The probe gets the wanted values on
its stdin and says, per variable, whether the file sets it to that value, so drift is named
per variable without its value or anything computed from it (``HF_TOKEN differs``). The
environment role makes the profile source the file.
"""

from __future__ import annotations

from podstate.desired.secret import Secret, render
from podstate.desired.state import State
from podstate.facts.probe import Probe
from podstate.facts.record import SecretsEntry
from podstate.facts.request import Request
from podstate.facts.secrets import SecretsState
from podstate.operations import secrets as secret_ops
from podstate.paths import SECRETS_FILE
from podstate.run import findings
from podstate.run.role import role


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the secrets file, compared with the wanted
    values (none without a secrets section)."""
    return Request(secrets=None if wanted.secrets is None else dict(wanted.secrets))


def drift(values: dict[str, Secret], found: SecretsState) -> str | None:
    """Return what differs on the pod, in words that hold no value, or None.

    Each name whose value differs (or is missing from the file) is named; a file
    that differs otherwise (a line added by hand, a name no longer wanted), or that is not
    root's with mode 600, is said to be so, and so are copies of it that a run killed
    between its upload and its install left beside it (the apply removes them).
    """
    if found.state == "absent":
        return f"{SECRETS_FILE} absent: " + ", ".join(f"{n} missing" for n in sorted(values))
    if found.state != "file":
        return f"{SECRETS_FILE} is a {found.state.replace('_', ' ')}"
    if (found.owner, found.mode) != (0, "600"):
        return f"{SECRETS_FILE} has owner {found.owner} and mode {found.mode}, want 0 and 600"
    words = [
        f"{name} {'missing' if name not in found.values else 'differs'}"
        for name in sorted(values)
        if not found.values.get(name)
    ]
    if found.leftovers:
        names = ", ".join(path.rsplit("/", 1)[-1] for path in found.leftovers)
        words.append(f"copies left by an interrupted run ({names})")
    return ", ".join(words) or None


@role("Secrets", reads, when=lambda wanted: wanted.secrets is not None)
def apply(wanted: State, probe: Probe) -> None:
    """Write the secrets file when what it sets, its owner or its mode differ."""
    values = dict(wanted.secrets or {})
    found = probe.secrets
    if found is None:
        raise ValueError("the probe did not read the secrets file")
    findings.made(SecretsEntry(SECRETS_FILE))
    secret_ops.secrets_file(
        name=f"Secrets file {SECRETS_FILE}",
        content=render(values),
        found=found,
        drift=drift(values, found) or "the secrets file was edited by hand",
    )
