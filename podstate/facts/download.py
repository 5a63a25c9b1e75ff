"""The probe's download test: how fast the pod downloads a URL, for the download role."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from podstate.facts.section import Argument, Arguments, Section


@dataclass(frozen=True)
class Download:
    """The download test's result."""

    mbps: float | None  # the rate measured; None when the download failed
    status: int  # curl's (or Python's) exit status; 0 when it measured


@dataclass(frozen=True)
class DownloadRequest:
    """What the download test reads (``Request.download``), as the download role asks it."""

    seconds: int  # the longest the test downloads for
    url: str  # what it downloads
    min_mbps: float  # the rate the role wants (the test does not use it)


def sent(asked: DownloadRequest | None) -> dict[str, Any] | None:
    """Return the probe's ``download`` argument for ``asked``, the plain dict pyinfra's fact is
    called with (``_lines`` reads its ``url`` and ``seconds``)."""
    if asked is None:
        return None
    return {"seconds": asked.seconds, "url": asked.url, "min_mbps": asked.min_mbps}


def probe_line(url: str, seconds: int) -> str:
    """Return probe lines that download ``url`` for at most ``seconds`` and print
    ``download STATUS BYTES SECONDS`` (curl, else Python); STATUS 0 when it measured."""
    python = (
        "import sys, time, urllib.request\n"
        "url, limit = sys.argv[1], float(sys.argv[2]); n = 0; start = time.monotonic()\n"
        "with urllib.request.urlopen(url, timeout=limit) as r:\n"
        "    while time.monotonic() - start < limit and (b := r.read(65536)):\n"
        "        n += len(b)\n"
        "print(n, time.monotonic() - start)"
    )
    u = shlex.quote(url)
    return (
        "if command -v curl >/dev/null 2>&1; then"
        f" d=$(curl -sS -o /dev/null -m {seconds} -w '%{{size_download}} %{{time_total}}' {u}"
        " 2>/dev/null); r=$?; [ $r = 28 ] && r=0;"
        f" else d=$(python3 -c {shlex.quote(python)} {u} {seconds} 2>/dev/null); r=$?; fi;"
        ' echo "download $r $d"'
    )


def parse(line: str | None) -> Download | None:
    """Return the download test's result; None when none was asked for."""
    if line is None:
        return None
    status, *numbers = line.split()
    if status != "0" or len(numbers) != 2 or float(numbers[1]) <= 0:
        return Download(mbps=None, status=int(status))
    return Download(mbps=float(numbers[0]) * 8 / 1e6 / float(numbers[1]), status=0)


def _lines(arguments: Arguments) -> list[str]:
    """Return the download section's lines: the test where the probe's arguments ask it."""
    download = arguments["download"]
    return [probe_line(download["url"], download["seconds"])] if download else []


SECTION = Section(
    "download",
    fields=("download",),
    parse=lambda answer: {"download": parse(answer.value("download"))},
    lines=_lines,
    arguments=(Argument("download", sent=sent),),
)
