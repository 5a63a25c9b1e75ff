"""Uploading a file to a pod atomically: to a temporary name beside it, then renamed over it."""

from __future__ import annotations

import posixpath
from collections.abc import Generator

from pyinfra.api import FileUploadCommand, operation

from podstate.run.lock import Change, changing
from podstate.shell import quote_path


@operation()
def upload_file(
    src: str, dest: str, mode: str = "755", gzipped: bool = False
) -> Generator[Change | FileUploadCommand, None, None]:
    """
    Upload a local file to the pod, atomically (the role calls it when the probe found
    no ``dest``).

    The file goes over SFTP to a temporary name beside ``dest`` (unpacked there when it is
    a gzip copy) and is renamed over it.

    + src: the file on the control machine
    + dest: absolute path on the pod
    + mode: octal mode of the file
    + gzipped: ``src`` is gzip-compressed; ``dest`` gets it unpacked

    **Example:**

    .. code:: python

        upload_file(name="Upload uv", src=gzcache.gzipped(find_uv_bin()),
                    dest="/opt/.podstate/uv", gzipped=True)
    """
    yield from upload_commands(src, dest, mode, gzipped)


def upload_commands(
    src: str, dest: str, mode: str, gzipped: bool
) -> list[Change | FileUploadCommand]:
    """Return the commands of ``upload_file``: the upload to a temporary name, then the
    rename (after unpacking a gzip copy); a list, so callers can yield them in turn."""
    temp = f"{dest}.podstate-upload"
    ready = quote_path(f"{dest}.podstate-new" if gzipped else temp)
    unpack = f"gzip -dc <{quote_path(temp)} >{ready} && " if gzipped else ""
    return [
        changing(f"mkdir -p -- {quote_path(posixpath.dirname(dest))}"),
        FileUploadCommand(src, temp),
        changing(
            f"{{ {unpack}chmod {mode} -- {ready} && mv -f -- {ready} {quote_path(dest)}; }} "
            f"|| {{ rm -f -- {quote_path(temp)} {ready}; exit 1; }}; rm -f -- {quote_path(temp)}"
        ),
    ]
