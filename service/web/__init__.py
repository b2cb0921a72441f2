"""Server-rendered pages: student pages and the instructor dashboard, over the service functions;
beside them the LMS's LTI endpoints (``lti_launch``: login, launch, deep link, JWKS)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from flask import Flask
from flask_wtf.csrf import CSRFProtect

from service.web import gradebook, instructor, lti, student, webhooks
from service.web.figures import attention_figure, training_figures
from service.web.pages import assets_blueprint
from service.web.security import configure_web_security


def init_web(app: Flask) -> None:
    """Register the pages, their static files and their security (call from ``create_app``)."""
    csrf = CSRFProtect()
    configure_web_security(app, csrf)
    # The API and token endpoints authenticate by bearer token, never by cookie: no CSRF there.
    for name in ("api", "lti_api", "auth"):
        if name in app.blueprints:
            csrf.exempt(app.blueprints[name])
    csrf.exempt(student.logout)  # a logout always ends the session (see the view)
    app.jinja_env.filters["in_zone"] = in_zone
    app.jinja_env.globals["attention_figure"] = attention_figure
    app.jinja_env.globals["training_figures"] = training_figures
    # The instructor's dashboard says when LMS scores wait for a release (lti/_release.html).
    app.jinja_env.globals["lms_release_notice"] = lti.release_notice
    app.register_blueprint(assets_blueprint())
    for blueprint in (student.blueprint, instructor.blueprint, instructor.account,
                      webhooks.blueprint, gradebook.blueprint, lti.dashboard):
        app.register_blueprint(blueprint)


def in_zone(moment: datetime, zone: str) -> str:
    """A moment as the instructor set it: in the assignment's time zone, named."""
    local = moment.astimezone(ZoneInfo(zone))
    return local.strftime("%Y-%m-%d %H:%M ") + (local.tzname() or zone) + (
        "" if zone == "UTC" else f" ({zone})")
