"""Gzip copies of control-machine files, made once and kept for uploads to pods.

Uploads to pods are bounded by the SSH channel's window over the link's round trip, not by
CPU: the uv binary (about 38 MB) gzipped is under half that, and a pod unpacks it in a
fraction of the time the bytes saved would take on the wire.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """Return podstate's cache directory on the control machine (XDG_CACHE_HOME honoured)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "podstate"


def gzipped(path: Path) -> Path | None:
    """Return a gzip copy of ``path`` in the cache, making it the first time; None on failure.

    The copy is named for the file's size and modification time, so an upgraded file gets a
    new copy (and older copies of it are removed). It is written under a temporary name and
    renamed, so concurrent runs never read a partial copy.
    """
    stat = path.stat()
    directory = cache_dir() / "uploads"
    target = directory / f"{path.name}-{stat.st_size}-{stat.st_mtime_ns}.gz"
    if target.is_file():
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.")
        try:
            with (
                os.fdopen(handle, "wb") as raw,
                gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as packed,
                path.open("rb") as source,
            ):
                shutil.copyfileobj(source, packed, 1 << 20)
            os.replace(temp, target)
        finally:
            Path(temp).unlink(missing_ok=True)
        for old in directory.glob(f"{path.name}-*.gz"):
            if old != target:
                old.unlink(missing_ok=True)
    except OSError:
        return None
    return target
