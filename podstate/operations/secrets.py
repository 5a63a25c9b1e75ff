"""The operation of the secrets role: upload the secrets file, root-only.

What the pod's file holds is read by the probe (podstate.facts.secrets), which answers only
same or differs. The values reach the pod as file content (``upload``), into the root-only
``SECRETS_DIR``, and are never part of a command line or a recorded diff.
"""

from __future__ import annotations

import io
import shlex
from collections.abc import Generator, Iterator

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.command import FileUploadCommand, PyinfraCommand

from podstate.facts.secrets import SecretsState
from podstate.paths import SECRETS_DIR, SECRETS_FILE
from podstate.run import findings
from podstate.run.lock import changing
from podstate.shell import script


def upload(content: str, dest: str) -> Iterator[PyinfraCommand | str]:
    """Yield the commands that put ``content`` at ``dest`` in ``SECRETS_DIR``, root-only.

    The directory is made 0700 first, so the uploads (file content, not a command line) are
    never readable by anyone else, even before their mode is set. The content is uploaded
    twice: scripts/install_secret.sh renames one copy into place with mode 600 and proves it
    against the other, so no digest of it is on any command line.
    """
    temp, check = f"{dest}.podstate-upload", f"{dest}.podstate-check"
    data = content.encode("utf-8", "surrogateescape")
    yield changing(f"mkdir -p -m 700 -- {SECRETS_DIR} && chmod 700 -- {SECRETS_DIR}")
    yield FileUploadCommand(io.BytesIO(data), temp)
    yield FileUploadCommand(io.BytesIO(data), check)
    yield changing(
        " ".join(["sh -c", shlex.quote(script("install_secret.sh")), "install_secret"])
        + " "
        + " ".join(shlex.quote(w) for w in [temp, check, dest])
    )


@operation()
def secrets_file(
    content: str, found: SecretsState, drift: str | None
) -> Generator[PyinfraCommand | str, None, None]:
    """
    Make the secrets file hold ``content``: uploaded, root-only, mode 600, verified.

    + content: the whole desired file (``podstate.desired.secret.render``)
    + found: the probe's ``secrets``; copies of the file a killed run left beside it
      (``leftovers``) are removed, by the upload that replaces them or on their own
    + drift: what differs, in words without any value (``HF_TOKEN differs``), or None

    The change is marked secret: no report shows a diff for it, and none is recorded.

    **Example:**

    .. code:: python

        secrets_file(name="Secrets file", content=render(values),
                     found=probe.secrets, drift="HF_TOKEN differs")
    """
    findings.mark_secret()
    if found.same and (found.owner, found.mode) == (0, "600"):
        if not found.leftovers:
            host.noop(f"{SECRETS_FILE} is up to date")
            return
        findings.describe(drift or "copies of the secrets file left by an interrupted run")
        yield changing("rm -f -- " + " ".join(shlex.quote(p) for p in found.leftovers))
        return
    findings.describe(drift or "the secrets file differs")
    yield from upload(content, SECRETS_FILE)
