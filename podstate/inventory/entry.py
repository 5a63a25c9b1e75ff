"""What podstate's starter files call, so that they stay a few lines that an upgrade never
changes: ``configure`` (config.py) and ``groups`` (inventories/pods.py); deploy/pod.py's is
``podstate.pod.deploy.run``.

Each imports what it uses inside, in order: config.py must put podstate's Ctrl-C handler
in place before anything else loads, and the inventory must verify pyinfra before a module
that uses its internals is imported.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def configure() -> None:
    """Set pyinfra's config for a run: podstate's Ctrl-C handler first (pyinfra's exits 0, as
    if the run had succeeded), the open-files limit (which caps how many pods pyinfra works
    on at once, so before the parallelism is read), the connect timeout, the parallelism."""
    from podstate import signals

    signals.install()

    from pyinfra import config

    from podstate.pyinfra_api import open_files

    open_files.raise_limit()

    from podstate.settings import CONNECT_TIMEOUT, PARALLEL

    config.CONNECT_TIMEOUT = CONNECT_TIMEOUT
    config.PARALLEL = PARALLEL


def groups() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Return pyinfra's inventory groups: the pods of ``podstate.inventory.fleet``'s sources,
    each with its resolved desired state; SystemExit, one line, for an invalid one. Names on
    stderr, one line each, the starter files of the working directory (the repository's root,
    as pyinfra's config.py is read from it) that are older than this version's."""
    from podstate.pyinfra_api.verify import verify

    verify()  # one line on a pyinfra without an internal podstate uses, before they load

    from podstate.pyinfra_api import connect, open_files

    open_files.raise_limit()  # before podstate's settings read pyinfra's parallelism from it
    connect.quiet()  # a pod that cannot be reached: one line naming why, no traceback

    from podstate import signals
    from podstate.desired.errors import SpecError
    from podstate.inventory.fleet import inventory_groups, load_pods
    from podstate.pyinfra_api import plan
    from podstate.repository import starter

    signals.install()
    plan.plan_faster()  # pyinfra plans each operation without reading source files
    for aged in starter.aged(Path.cwd()):
        if aged.found is not None:
            print(f"podstate: {aged.line()}", file=sys.stderr)
    try:
        return inventory_groups(load_pods())
    except SpecError as error:
        raise SystemExit(f"podstate: {error}") from None
