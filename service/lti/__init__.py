"""LTI 1.3 tool: launches from an LMS, deep linking, and grade passback to its gradebook."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask


def init_lti(app: Flask) -> None:
    """Register the LTI endpoints and pages (call from ``create_app``, after ``init_web``)."""
    from service.lti import views

    app.extensions["autograde.lti"] = views.LtiRuntime(app.config)
    # The instructor's dashboard says when LMS scores wait for a release (lti/_release.html).
    app.jinja_env.globals["lms_release_notice"] = views.release_notice
    for blueprint in (views.blueprint, views.dashboard, views.api):
        app.register_blueprint(blueprint)
    # The LMS posts the login and launch (authenticated by the signed id_token, not a cookie);
    # the deep-link pick carries a signed token; the API authenticates by bearer token.
    csrf = app.extensions["csrf"]
    csrf.exempt(views.blueprint)
    csrf.exempt(views.api)


__all__ = ["init_lti"]
