"""Prometheus metrics of the fleet: served by ``podstate watch --metrics-port PORT``, and
written by ``podstate check --metrics PATH`` for node_exporter's textfile collector.

The gauges say the fleet now, from one snapshot of its pods (``Fleet``, replaced whole at
each pass, so a scrape never reads half a pass): ``podstate_pods{status,provider}`` (each
pod once), ``podstate_group_pods{group,status,provider}`` (a pod in each of its groups),
``podstate_fleet_cost_dollars_per_hour`` and ``podstate_pods_price_unknown``,
``podstate_idle_cost_dollars_per_hour``. The watch adds counters of what it did
(``podstate_restarts_put_back_total``, ``podstate_applies_total``,
``podstate_apply_failures_total``, ``podstate_idle_stops_total``,
``podstate_idle_stop_saved_dollars_per_hour_total``), histograms of a restart's container
start to ready marker and of a pass's duration, and the time the last pass completed. Each
comes from what a pass already knew (``podstate.watch.hooks.Pass``); no label names a pod.

Each process has a registry of its own (never prometheus_client's global one), served by
prometheus_client's WSGI server in a daemon thread. ``/`` serves the fleet's page of the
latest check report where ``page`` can make one, the metrics otherwise; ``/metrics`` always
serves the metrics.
"""

from __future__ import annotations

import collections
import importlib
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    make_wsgi_app,
    write_to_textfile,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from podstate.check import result
from podstate.check.result import STATUSES, PodResult
from podstate.watch.hooks import Pass, PodView
from podstate.watch.options import Options, WatchError

# A restart put back takes the wait for the next pass (30 s by default) and an apply.
READY_BUCKETS = (10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
PASS_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


def start(options: Options) -> list[Metrics]:
    """Return the metrics ``options`` ask for (``--metrics-port``), served, if any;
    WatchError, one line, when they cannot be."""
    if options.metrics_port is None:
        return []
    return [Metrics.serve(options.metrics_address, options.metrics_port)]


class Fleet(Collector):
    """The gauges of the fleet, from ``pods`` (each listed pod, as a pass or a check left
    it); a pod of no known status yet is in the costs only."""

    def __init__(self, pods: dict[str, PodView] | None = None) -> None:
        self.pods = pods or {}

    def collect(self) -> Iterator[Metric]:
        """Return the gauges of ``pods``: every status of every provider (and group) listed,
        0 included, so a status that empties reads 0 rather than vanishing."""
        pods = self.pods.values()  # one snapshot: a pass replaces the dict whole
        counts: collections.Counter[tuple[str, ...]] = collections.Counter()
        grouped: collections.Counter[tuple[str, ...]] = collections.Counter()
        for view in pods:
            if view.status is not None:
                status = view.status if view.status in STATUSES else "error"
                counts[(status, view.provider)] += 1
                for group in view.groups:
                    grouped[(group, status, view.provider)] += 1
        by_status = GaugeMetricFamily(
            "podstate_pods", "Pods by status and provider.", labels=["status", "provider"]
        )
        for provider in sorted({v.provider for v in pods}):
            for status in STATUSES:
                by_status.add_metric([status, provider], counts[(status, provider)])
        by_group = GaugeMetricFamily(
            "podstate_group_pods",
            "Pods by group, status and provider; a pod counts in each of its groups.",
            labels=["group", "status", "provider"],
        )
        for group, provider in sorted({(g, v.provider) for v in pods for g in v.groups}):
            for status in STATUSES:
                by_group.add_metric([group, status, provider], grouped[(group, status, provider)])
        yield by_status
        yield by_group
        known = [v.cost_per_hour for v in pods if v.cost_per_hour is not None]
        idle = [v.cost_per_hour for v in pods if v.idle and v.cost_per_hour is not None]
        yield _gauge(
            "podstate_fleet_cost_dollars_per_hour",
            "What the pods of known price cost, USD per hour.",
            sum(known),
        )
        yield _gauge(
            "podstate_pods_price_unknown", "Pods whose price is unknown.", len(pods) - len(known)
        )
        yield _gauge(
            "podstate_idle_cost_dollars_per_hour",
            "What the pods idle now cost, USD per hour.",
            sum(idle),
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


class Metrics:
    """The watch's metrics: the fleet's gauges, and counters and histograms of its passes."""

    def __init__(self) -> None:
        # No ``*_created`` series beside each counter and histogram: the text format makes
        # each one a gauge of its own. prometheus_client keeps this per process, which is
        # the watch's.
        disable: Callable[[], None] = disable_created_metrics  # unannotated in prometheus_client
        disable()
        self.registry = CollectorRegistry()
        self.fleet = Fleet()
        self.registry.register(self.fleet)
        r = self.registry
        self.put_back = Counter(
            "podstate_restarts_put_back", "Restarted pods put back.", registry=r
        )
        self.applies = Counter("podstate_applies", "Applies to a pod, ended.", registry=r)
        self.failures = Counter(
            "podstate_apply_failures", "Applies to a pod that failed.", registry=r
        )
        self.stops = Counter("podstate_idle_stops", "Idle pods stopped.", registry=r)
        self.saved = Counter(
            "podstate_idle_stop_saved_dollars_per_hour",
            "The price per hour of each idle pod stopped, added up: what the stops save an hour.",
            registry=r,
        )
        self.ready = Histogram(
            "podstate_restart_to_ready_seconds",
            "From a restarted pod's container start to its ready marker.",
            buckets=READY_BUCKETS,
            registry=r,
        )
        self.pass_seconds = Histogram(
            "podstate_pass_duration_seconds",
            "How long a pass took.",
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.last = Gauge(
            "podstate_last_pass_completed_timestamp_seconds",
            "When the last pass completed, in seconds since the epoch.",
            registry=r,
        )
        self.report: dict[str, dict[str, Any]] | None = None  # the latest check's pods
        self.checked = 0.0  # when its pass ended
        self.server: ThreadingWSGIServer | None = None
        # prometheus_client's WSGI application, declared a bare Callable there
        self._metrics: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
        self._metrics = make_wsgi_app(self.registry)

    def passed(self, seen: Pass) -> None:
        """Take a pass's record: the fleet's snapshot, and what the pass did."""
        self.fleet.pods = seen.pods
        for applied in seen.applied:
            self.applies.inc()
            if applied.error is not None:
                self.failures.inc()
            elif applied.why == "restarted":
                self.put_back.inc()
                if applied.ready_after is not None:
                    self.ready.observe(applied.ready_after)
        for _, price in seen.stopped:
            self.stops.inc()
            self.saved.inc(price or 0.0)
        self.pass_seconds.observe(seen.seconds)
        self.last.set(seen.time)
        if seen.report is not None:
            self.report, self.checked = seen.report, seen.time

    @classmethod
    def serve(cls, address: str, port: int) -> Metrics:
        """Return metrics served on ``address``:``port`` from a daemon thread; WatchError,
        one line, when it cannot listen there."""
        if not 0 <= port <= 65535:
            raise WatchError(f"--metrics-port {port}: expected a port from 0 to 65535")
        metrics, host = cls(), address.removeprefix("[").removesuffix("]")  # [::] too
        try:
            server = make_server(host, port, metrics.app, _server_class(host, port), _Quiet)
        except (OSError, ValueError) as e:
            why = getattr(e, "strerror", None) or str(e)
            raise WatchError(f"--metrics-port {port}: cannot listen on {address}: {why}") from None
        metrics.server = server
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        return metrics

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The WSGI application: the fleet's page at ``/`` where there is one, else the
        metrics."""
        if environ.get("PATH_INFO") in ("", "/") and self.report is not None:
            try:
                pods = result.from_json({"pods": self.report})
                html = page(result.to_json(pods, checked_at=result.stamp(self.checked)))
            except Exception as e:  # the page's fault, not the watch's: said in one line
                start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
                return [f"the fleet page could not be made: {type(e).__name__}\n".encode()]
            if html is not None:
                start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
                return [html.encode()]
        return self._metrics(environ, start_response)

    def close(self) -> None:
        """Stop serving (tests; the watch's server ends with its process)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def page(report: dict[str, Any]) -> str | None:
    """Return the fleet's page of the check report ``report`` (the JSON report's document),
    for ``/``: ``podstate.check.html.render``'s, None where that module is not there."""
    try:
        module = importlib.import_module("podstate.check.html")
    except ModuleNotFoundError as e:
        if e.name != "podstate.check.html":
            raise
        return None
    rendered: str = module.render(report)  # render(report) -> the page's HTML
    return rendered


def views(
    results: dict[str, PodResult], labels: dict[str, tuple[str, tuple[str, ...]]]
) -> dict[str, PodView]:
    """Return the pods of a check's ``results`` as the gauges read them, with each one's
    provider and groups from ``labels`` (none known: the pods file's, no group)."""
    return {
        name: PodView(
            r.status,
            *labels.get(name, ("file", ())),
            cost_per_hour=r.cost_per_hour,
            idle=r.idle is True,
        )
        for name, r in results.items()
    }


def write_textfile(path: str, pods: dict[str, PodView]) -> None:
    """Write the fleet's gauges to ``path`` for node_exporter's textfile collector,
    atomically (a file beside it, then a rename); OSError when it cannot."""
    registry = CollectorRegistry()
    registry.register(Fleet(pods))
    write_to_textfile(path, registry)


class _Quiet(WSGIRequestHandler):
    """A request handler that logs no line per request (the watch's output is its events)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _server_class(host: str, port: int) -> type[ThreadingWSGIServer]:
    """Return the server class that listens on ``host``: of the family its first address is
    (``::`` or ``::1`` IPv6, a name as it resolves); socket.gaierror, an OSError, when it
    names none."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    return type("Server", (ThreadingWSGIServer,), {"address_family": family})
