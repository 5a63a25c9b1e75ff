"""What the runs a watch pass starts are given: the pass's private files, among them the
listing it made, and the command of pyinfra's CLI.

The check (``podstate check``) and the apply (pyinfra) build the inventory as any run does;
handed the pass's listing through ``PODSTATE_API_LISTING``, they read the pods the pass
listed instead of asking the API again, so a pass costs the API one request, whatever it
runs, and every run of the pass sees the same pods.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from podstate.inventory.api_client import LISTING_ENV


@contextmanager
def handed(listing: dict[str, list[Any]] | None) -> Iterator[tuple[Path, dict[str, str]]]:
    """Yield a private directory for the pass (0700, gone when the block ends) and the
    environment of the runs it starts: this process's, with ``PODSTATE_API_LISTING`` naming
    a file of ``listing`` in that directory (mode 0600; each provider's records as its
    ``kept`` leaves them, no API key: ``{"pods": RunPod's, "vast": Vast's}``), or without
    it for a pods file (None)."""
    with tempfile.TemporaryDirectory(prefix="podstate-watch-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != LISTING_ENV}
        if listing is not None:
            path = Path(tmp) / "listing.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump(listing, handle)
            env[LISTING_ENV] = str(path)
        yield Path(tmp), env


def pyinfra() -> list[str]:
    """Return the command that runs the pyinfra CLI of this installation."""
    script = Path(sys.executable).parent / "pyinfra"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pyinfra"]
