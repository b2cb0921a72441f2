"""Server-rendered pages: student pages and the instructor dashboard, over the service functions."""

from __future__ import annotations

from flask import Flask
from flask_wtf.csrf import CSRFProtect

from service.web import instructor, student, webhooks
from service.web.pages import assets_blueprint
from service.web.security import configure_web_security


def init_web(app: Flask) -> None:
    """Register the pages, their static files and their security (call from ``create_app``)."""
    csrf = CSRFProtect()
    configure_web_security(app, csrf)
    # The API and token endpoints authenticate by bearer token, never by cookie: no CSRF there.
    for name in ("api", "auth"):
        if name in app.blueprints:
            csrf.exempt(app.blueprints[name])
    app.register_blueprint(assets_blueprint())
    for blueprint in (student.blueprint, instructor.blueprint, instructor.account,
                      webhooks.blueprint):
        app.register_blueprint(blueprint)
