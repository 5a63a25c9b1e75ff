"""What the probe reads for the secrets role, and the operation that uploads secret files.

The probe's ``secrets.*`` lines (scripts/secrets_state.sh) carry salted digests only; the
values reach the pod as file content over SFTP (``upload``), into the root-only
``SECRETS_DIR``, and are never part of a command line or a recorded diff.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Iterator
from typing import Any

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.command import FileUploadCommand, PyinfraCommand

from podstate import findings
from podstate.lock import changing
from podstate.secret import SALT, SECRETS_DIR, SECRETS_FILE, digest
from podstate.shell import script


def probe_lines(names: list[str]) -> list[str]:
    """Return the probe lines that read the secrets file: its owner, mode and digest, and
    the digest of each of ``names`` it sets (see scripts/secrets_state.sh)."""
    words = " ".join(shlex.quote(n) for n in [SECRETS_FILE, SALT, *names])
    return [script("secrets_state.sh"), f"secrets_state {words}"]


def parse(lines: list[str]) -> dict[str, Any]:
    """Return the probe's ``secrets`` dict from its ``secrets.*`` lines.

    ``{"state": "file" | "absent" | KIND, "owner": 0, "mode": "600", "digest": HEX,
    "values": {NAME: HEX}}``: digests salted with this run's ``SALT``; ``values`` only
    for a file of root with mode 600 (podstate reads no other).
    """
    words, values = ["absent"], {}
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "secrets.file":
            words = rest.split(" ")
        elif key == "secrets.value":
            name, _, hexdigest = rest.partition(" ")
            values[name] = hexdigest
    if len(words) == 3:
        return {
            "state": "file",
            "owner": int(words[0]),
            "mode": words[1],
            "digest": words[2],
            "values": values,
        }
    return {"state": words[0], "owner": None, "mode": None, "digest": None, "values": {}}


def upload(content: str, dest: str) -> Iterator[PyinfraCommand | str]:
    """Yield the commands that put ``content`` at ``dest`` in ``SECRETS_DIR``, root-only.

    The directory is made 0700 first, so the upload (SFTP, not a command line) is never
    readable by anyone else, even before its mode is set; then scripts/install_secret.sh
    renames it into place with mode 600 and proves the content by its salted digest.
    """
    temp = f"{dest}.podstate-upload"
    yield changing(f"mkdir -p -m 700 -- {SECRETS_DIR} && chmod 700 -- {SECRETS_DIR}")
    yield FileUploadCommand(io.BytesIO(content.encode("utf-8", "surrogateescape")), temp)
    words = [temp, dest, SALT, digest(content)]
    yield changing(
        " ".join(["sh -c", shlex.quote(script("install_secret.sh")), "install_secret"])
        + " "
        + " ".join(shlex.quote(w) for w in words)
    )


@operation()
def secrets_file(content: str, found: dict[str, Any], drift: str | None):
    """
    Make the secrets file hold ``content``: uploaded, root-only, mode 600, verified.

    + content: the whole desired file (``podstate.secret.render``)
    + found: the probe's ``secrets`` dict
    + drift: what differs, in words without any value (``HF_TOKEN differs``), or None

    The change is marked secret: no report shows a diff for it, and none is recorded.

    **Example:**

    .. code:: python

        secrets_file(name="Secrets file", content=render(values),
                     found=probe["secrets"], drift="HF_TOKEN differs")
    """
    if found["digest"] == digest(content) and (found["owner"], found["mode"]) == (0, "600"):
        host.noop(f"{SECRETS_FILE} is up to date")
        return
    findings.describe(drift or "the secrets file differs")
    findings.mark_secret()
    yield from upload(content, SECRETS_FILE)
