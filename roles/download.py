"""Download speed: hosts differ, and a slow one stalls every model and package download."""

from __future__ import annotations

from podstate.desired import state
from podstate.desired.state import State
from podstate.facts.download import Download, DownloadRequest
from podstate.facts.probe import Probe
from podstate.facts.request import Request
from podstate.run import findings
from podstate.run.role import role


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the download test, when one is asked."""
    test = wanted.download
    if test is None:
        return Request()
    return Request(download=DownloadRequest(test.seconds, test.url, test.min_mbps))


def check(wanted: state.Download | None, result: Download | None) -> str | None:
    """Return why the measured download rate fails ``wanted``, or None."""
    if not wanted or result is None:
        return None
    url, minimum = wanted.url, wanted.min_mbps
    if result.mbps is None:
        return (
            f"downloading {url} failed on this pod (status {result.status}): check that the "
            "pod reaches it, or choose a URL it can reach"
        )
    if result.mbps < minimum:
        return (
            f"downloading {url} ran at {result.mbps:.0f} Mbit/s over {wanted.seconds} s, "
            f"below {minimum} Mbit/s: model and package downloads will crawl; recreate the "
            "pod on another host"
        )
    return None


@role("Download", reads, when=lambda wanted: wanted.download)
def apply(wanted: State, probe: Probe) -> None:
    """Record a violation when the pod downloads ``download.url`` slower than asked."""
    problem = check(wanted.download, probe.download)
    if problem:
        findings.violation(problem, "download.min_mbps")
