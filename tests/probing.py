"""The probe run by this machine's sh as a pod runs it: its command line (``READER``), with its
program on stdin (``payload``), for the tests that read this machine's own paths."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any


def run(
    paths: Sequence[str] = (),
    files: Sequence[str] = (),
    venv: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    **arguments: Any,
) -> subprocess.CompletedProcess[str]:
    """Return the finished probe of ``paths``, ``files``, ``venv`` and the other ``arguments``
    (``PodProbe``'s), run by ``sh`` here with the environment ``env`` (None: this one's)."""
    from podstate.facts import probe

    program = probe.payload({"paths": list(paths), "files": list(files), "venv": venv, **arguments})
    return subprocess.run(
        ["sh", "-c", probe.READER],
        input="".join(f"{line}\n" for line in program),
        capture_output=True,
        text=True,
        env=env,
    )
