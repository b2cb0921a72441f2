"""What every page blueprint shares: security headers and errors rendered as HTML pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, render_template
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from service.core.db import session
from service.core.errors import ServiceError
from service.web.security import security_headers

PACKAGE = Path(__file__).resolve().parents[1]


def page_blueprint(name: str, import_name: str, **options: Any) -> Blueprint:
    blueprint = Blueprint(name, import_name, **options)
    blueprint.after_request(security_headers)
    blueprint.register_error_handler(ServiceError, _service_error)
    blueprint.register_error_handler(CSRFError, _csrf_error)
    blueprint.register_error_handler(HTTPException, _http_error)
    return blueprint


def assets_blueprint() -> Blueprint:
    """Templates, styles, scripts and the vendored chart library: all served by the app."""
    blueprint = Blueprint("assets", __name__, static_folder=str(PACKAGE / "static"),
                          static_url_path="/static", template_folder=str(PACKAGE / "templates"))
    blueprint.after_request(security_headers)
    return blueprint


def _service_error(error: ServiceError) -> tuple[str, int]:
    session().rollback()
    return render_template("error.html", status=error.status, title=error.title,
                           detail=error.detail), error.status


def _csrf_error(error: CSRFError) -> tuple[str, int]:
    return render_template("error.html", status=400, title="Form expired",
                           detail="The form was too old or not sent by this site; reload the "
                                  "page and try again."), 400


def _http_error(error: HTTPException) -> tuple[str, int]:
    status = error.code or 500
    return render_template("error.html", status=status, title=error.name,
                           detail=error.description or error.name), status
