"""``podstate uninstall``: take away everything podstate made on the chosen pods.

It runs podstate.pod.uninstall_deploy, which reads no desired state (the inventory's pods get
an empty one), only the records of what podstate made on each pod (roles/removal.py): with
``dry_run`` it plans it as the check does and reports what would go; else pyinfra applies it
(under the pod lock, in one command per pod), and then it is planned again: what is left is
the result, so a green means the pods hold nothing podstate made.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from podstate import settings
from podstate.check import runner
from podstate.check.result import PodResult
from podstate.paths import VOLUME

DEPLOY = str(Path(__file__).resolve().parent.parent / "pod" / "uninstall_deploy.py")


@contextmanager
def _nothing_declared(
    volume: str, packages: bool, keep_venv: bool, discard_scratch: bool
) -> Iterator[dict[str, str]]:
    """Within the block, ``PODSTATE_VARS`` is a vars directory that declares nothing (the
    inventory still needs one), ``PODSTATE_UNINSTALL_VOLUME`` is ``volume`` and
    ``PODSTATE_UNINSTALL_PACKAGES`` says ``packages``, ``PODSTATE_UNINSTALL_KEEP_VENV``
    ``keep_venv`` and ``PODSTATE_UNINSTALL_DISCARD_SCRATCH`` ``discard_scratch``; yield the
    environment of a pyinfra run the same."""
    with tempfile.TemporaryDirectory(prefix="podstate-uninstall-") as directory:
        (Path(directory) / "group_vars").mkdir()
        (Path(directory) / "group_vars" / "all.yaml").write_text("{}\n")
        new = {
            "PODSTATE_VARS": directory,
            "PODSTATE_UNINSTALL_VOLUME": volume,
            "PODSTATE_UNINSTALL_PACKAGES": "1" if packages else "0",
            "PODSTATE_UNINSTALL_KEEP_VENV": "1" if keep_venv else "0",
            "PODSTATE_UNINSTALL_DISCARD_SCRATCH": "1" if discard_scratch else "0",
        }
        old = {name: os.environ.get(name) for name in new}
        os.environ.update(new)
        try:
            yield {**os.environ}
        finally:
            for name, value in old.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _pyinfra() -> list[str]:
    """Return the command that runs the pyinfra CLI of this installation."""
    script = Path(sys.executable).parent / "pyinfra"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pyinfra"]


def run(
    inventory: str,
    limit: list[str],
    dry_run: bool = False,
    volume: str = VOLUME,
    packages: bool = False,
    keep_venv: bool = False,
    discard_scratch: bool = False,
    timeout: int = settings.CONNECT_TIMEOUT,
    strict_host_keys: bool | None = None,
    progress: runner.Progress = lambda name, stage: None,
) -> tuple[dict[str, PodResult], int]:
    """Return each pod's verdict (with ``dry_run``: what would go, as drift; else what is
    left after the uninstall) and pyinfra's exit status (0 for a dry run)."""

    def plan() -> dict[str, PodResult]:
        return runner.run(
            inventory,
            [DEPLOY],
            limit,
            timeout=timeout,
            strict_host_keys=strict_host_keys,
            progress=progress,
        )

    with _nothing_declared(volume, packages, keep_venv, discard_scratch) as environment:
        planned = plan()
        # a pod with a violation (a busy venv or tmpfs, one with files) has the rest of it
        # taken away all the same
        chosen = sorted(
            name
            for name, r in planned.items()
            if r.status == "drift" or (r.status == "violation" and r.changes)
        )
        if dry_run or not chosen:
            return planned, 0
        if strict_host_keys:
            environment["PODSTATE_STRICT_HOST_KEYS"] = "1"
        limits = [word for name in chosen for word in ("--limit", name)]
        applied = subprocess.run(
            [*_pyinfra(), "-y", *limits, inventory, DEPLOY],
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        if applied.returncode != 0:  # what failed, as pyinfra said it
            sys.stderr.write(applied.stdout[-4000:] + applied.stderr[-4000:])
        return plan(), applied.returncode
