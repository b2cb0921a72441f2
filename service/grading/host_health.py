"""A grading host's own health and metrics: a small HTTP server in the worker's main process.

``GET /healthz`` answers 200 when this host reaches the database and the broker, 503 otherwise
(a load balancer's or an orchestrator's liveness probe); ``GET /metrics`` says the same for
Prometheus, with the host's pool size, the gradings it holds now, its sandbox containers on the
Docker sandbox (warm and grading: the warm ones are the containers less the gradings) and the
version of each assignment package it holds (what
``autograde_waiting_submissions{reason="version"}`` on the fleet's endpoint is to be read
against).
"""

from __future__ import annotations

import json
import logging
import socketserver
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.grading.metrics import CONTENT_TYPE, exposition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostProbe:
    """What the host's endpoints report: its name, its pool size, the packages it holds
    (slug to version), and checks that answer whether the database and the broker are
    reachable, how many gradings this host holds and how many sandbox containers it has
    (None: not on the Docker sandbox, or its engine does not answer)."""

    host: str
    processes: int
    packages: dict[str, str]
    database_up: Callable[[], bool]
    broker_up: Callable[[], bool]
    running_here: Callable[[], int]
    sandbox_containers: Callable[[], int | None] = lambda: None


class HostCollector(Collector):
    """The host's metrics, computed at each scrape."""

    def __init__(self, probe: HostProbe) -> None:
        self._probe = probe

    def collect(self) -> Iterator[Metric]:
        probe = self._probe
        labels = ["host"]
        for name, text, value in (
                ("autograde_host_database_up", "1 when this host reaches the database.",
                 float(probe.database_up())),
                ("autograde_host_broker_up", "1 when this host reaches the broker.",
                 float(probe.broker_up())),
                ("autograde_host_processes", "Grading processes this host runs.",
                 float(probe.processes)),
                ("autograde_host_gradings_in_progress", "Submissions this host is grading.",
                 float(probe.running_here()))):
            family = GaugeMetricFamily(name, text, labels=labels)
            family.add_metric([probe.host], value)
            yield family
        containers = probe.sandbox_containers()
        if containers is not None:
            family = GaugeMetricFamily(
                "autograde_host_sandbox_containers",
                "Sandbox containers of this host's grading processes: warm ones waiting for a "
                "job and those grading one.", labels=labels)
            family.add_metric([probe.host], float(containers))
            yield family
        held = GaugeMetricFamily("autograde_host_assignment_version",
                                 "1 for each assignment package version this host holds.",
                                 labels=["host", "assignment", "version"])
        for slug, version in sorted(probe.packages.items()):
            held.add_metric([probe.host, slug, version], 1.0)
        yield held


def health_app(probe: HostProbe) -> Callable[..., Iterable[bytes]]:
    """The WSGI application of the two endpoints."""
    collector = HostCollector(probe)

    def application(environ: dict[str, Any],
                    start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
            return [exposition(collector)]
        if path == "/healthz":
            database, broker = probe.database_up(), probe.broker_up()
            ok = database and broker
            body = json.dumps({"status": "ok" if ok else "unavailable", "host": probe.host,
                               "database": database, "broker": broker}).encode()
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "application/json")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]

    return application


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds are not worth a log line each."""


def serve_health(probe: HostProbe, *, address: str, port: int) -> WSGIServer:
    """Serve the endpoints on ``address:port`` from a daemon thread; the server."""
    server = make_server(address, port, health_app(probe), server_class=_ThreadingServer,
                         handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="autograde-host-health",
                     daemon=True).start()
    log.info("host health and metrics on http://%s:%s/healthz and /metrics", address,
             server.server_port)
    return server
