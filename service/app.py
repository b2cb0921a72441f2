"""The application factory: everything is built here, from defaults plus environment.

This is the web process (and the base of the worker's): it sends tasks by name and never loads
the grading pipeline or torch; the worker's own objects are wired in ``service.tasks``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, current_app, jsonify, request
from sqlalchemy import text
from werkzeug.middleware.proxy_fix import ProxyFix

from service import api, auth
from service.api import lti as api_lti
from service.celery_app import celery_init_app
from service.config import load_config
from service.core.db import Database, database, session
from service.core.edge import install_edge_checks
from service.core.errors import NotFound, Unauthorized, register_error_handlers
from service.core.queue import queue_depth
from service.grading.metrics import CONTENT_TYPE, FleetCollector, exposition, token_matches
from service.grading.status_watch import StatusWatch, status_watch
from service.web import init_web
from service.web.lti_launch import init_lti


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: ``config`` overrides the ``AUTOGRADE_*`` environment and the defaults."""
    app = Flask("autograde", static_folder=None)
    install_edge_checks(app)  # first: the id converter must be in place before any route
    app.config.update(load_config(config))
    app.config["MAX_CONTENT_LENGTH"] = app.config["MAX_UPLOAD_BYTES"]
    app.json.sort_keys = False  # type: ignore[attr-defined]
    hops = int(app.config["PROXY_HOPS"])
    if hops:
        proxied = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops)
        app.wsgi_app = proxied  # type: ignore[method-assign]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                                                   "%(message)s")

    db = database.install(app, Database(app.config["DATABASE_URL"]))
    app.teardown_appcontext(lambda _exc: db.sessions.remove())

    status_watch.install(app, StatusWatch.from_config(app.config))
    register_error_handlers(app)
    app.register_blueprint(auth.blueprint)
    app.register_blueprint(api.blueprint)
    app.register_blueprint(api_lti.api)
    init_web(app)
    init_lti(app)
    app.add_url_rule("/healthz", "health", _health)
    app.add_url_rule("/metrics", "metrics", _metrics)
    celery_init_app(app)
    return app


def _health() -> Response:
    session().execute(text("SELECT 1"))
    return jsonify(status="ok")


def _metrics() -> Response:
    """The fleet's metrics for Prometheus, to a scraper holding the metrics token."""
    expected = current_app.config["METRICS_TOKEN"]
    if not expected:
        raise NotFound("There is no such page.")
    if not token_matches(expected, request.headers.get("Authorization")):
        raise Unauthorized("The metrics need the bearer token set in AUTOGRADE_METRICS_TOKEN.")
    collector = FleetCollector(session, queue_depth, str(current_app.config["QUEUE"]))
    return Response(exposition(collector), content_type=CONTENT_TYPE)
