"""What the probe reads for the secrets role, and the operation that uploads secret files.

The probe gets the wanted values on its stdin (``probe_stdin``), never on its command line,
and its ``secrets.*`` lines (scripts/secrets_state.sh) say only ``same`` or ``differs`` per
name: no digest, so nothing in pyinfra's output at any verbosity lets a guess at a value be
tested. The values reach the pod as file content (``upload``), into the root-only
``SECRETS_DIR``, and are never part of a command line or a recorded diff.
"""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Iterator
from typing import Any

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.command import FileUploadCommand, PyinfraCommand

from podstate.desired.secret import Secret, render
from podstate.paths import SECRETS_DIR, SECRETS_FILE
from podstate.run import findings
from podstate.run.lock import changing
from podstate.shell import b64, script

# The probe's first line when it reads secrets: its stdin (the wanted values) is kept on
# file descriptor 3 for secrets_state alone; every other command of the probe reads nothing.
KEEP_STDIN = "exec 3<&0 </dev/null"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Hidden(list):
    """Lines for a command's stdin, shown as ``(hidden)``: pyinfra prints a fact's keyword
    arguments, ``_stdin`` among them, in its "Loaded fact" line."""

    def __repr__(self) -> str:
        return "(hidden)"

    __str__ = __repr__


def probe_lines(names: list[str]) -> list[str]:
    """Return the probe lines that compare the secrets file, and each of ``names`` it sets,
    with the wanted ones on the probe's stdin (see scripts/secrets_state.sh).

    The file is sourced in a subshell of its own for each name, so no variable of the probe
    (nor the value of another name) can hide one; a name is written into the code itself,
    so it must be a variable name (ValueError, else: the schema allows no other).
    """
    for name in names:
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a variable name: {name!r}")
    f = shlex.quote(SECRETS_FILE)
    read = f"unset {{0}}; . {f} >/dev/null 2>&1 </dev/null; "
    read += '[ -z "${{{0}+x}}" ] || {{ printf x; printf %s "${0}" | b64; }}'
    calls = "".join(f'secrets_value {n} "$({read.format(n)})"; ' for n in names)
    return [script("secrets_state.sh"), f"{{ if secrets_file {f}; then {calls}:; fi; }} <&3"]


def probe_stdin(values: dict[str, Secret]) -> Hidden:
    """Return the probe's stdin for ``values``: the whole wanted file, then each value in
    name order (the order of ``probe_lines``' names), each one line of base64."""
    return Hidden([b64(render(values)), *(b64(values[name].value) for name in sorted(values))])


def parse(lines: list[str]) -> dict[str, Any]:
    """Return the probe's ``secrets`` dict from its ``secrets.*`` lines.

    ``{"state": "file" | "absent" | KIND, "owner": 0, "mode": "600", "same": True,
    "values": {NAME: True}}``: ``same``, whether the file is byte for byte the wanted one;
    ``values``, for each name the file sets, whether its value is the wanted one (read only
    from a file of root with mode 600: podstate reads no other).
    """
    words, values = ["absent"], {}
    for line in lines:
        key, _, rest = line.partition(" ")
        if key == "secrets.file":
            words = rest.split(" ")
        elif key == "secrets.value":
            name, _, answer = rest.partition(" ")
            values[name] = answer == "same"
    if len(words) == 3:
        return {
            "state": "file",
            "owner": int(words[0]),
            "mode": words[1],
            "same": words[2] == "same",
            "values": values,
        }
    return {"state": words[0], "owner": None, "mode": None, "same": False, "values": {}}


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
def secrets_file(content: str, found: dict[str, Any], drift: str | None):
    """
    Make the secrets file hold ``content``: uploaded, root-only, mode 600, verified.

    + content: the whole desired file (``podstate.desired.secret.render``)
    + found: the probe's ``secrets`` dict
    + drift: what differs, in words without any value (``HF_TOKEN differs``), or None

    The change is marked secret: no report shows a diff for it, and none is recorded.

    **Example:**

    .. code:: python

        secrets_file(name="Secrets file", content=render(values),
                     found=probe["secrets"], drift="HF_TOKEN differs")
    """
    if found["same"] and (found["owner"], found["mode"]) == (0, "600"):
        host.noop(f"{SECRETS_FILE} is up to date")
        return
    findings.describe(drift or "the secrets file differs")
    findings.mark_secret()
    yield from upload(content, SECRETS_FILE)
