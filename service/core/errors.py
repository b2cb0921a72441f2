"""Errors as ``application/problem+json`` (RFC 9457) from one helper; no traceback to clients."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, json
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"


class ServiceError(Exception):
    """A failure the client should read: an HTTP status, a title and a human message."""

    status = 400
    title = "Bad request"

    def __init__(self, detail: str, *, status: int | None = None, title: str | None = None,
                 **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status or self.status
        self.title = title or self.title
        self.extra = extra


class NotFound(ServiceError):
    status, title = 404, "Not found"


class Forbidden(ServiceError):
    status, title = 403, "Forbidden"


class Unauthorized(ServiceError):
    status, title = 401, "Authentication required"


class Conflict(ServiceError):
    status, title = 409, "Conflict"


class TooLarge(ServiceError):
    status, title = 413, "Upload too large"


class UnsupportedMedia(ServiceError):
    status, title = 415, "Unsupported media type"


class RateLimited(ServiceError):
    status, title = 429, "Too many submissions"


BEARER_CHALLENGE = 'Bearer realm="autograde"'
"""The ``WWW-Authenticate`` header of every 401."""


def problem_document(status: int, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The body of every error: an RFC 9457 problem document."""
    return {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}


def problem(status: int, title: str, detail: str, **extra: Any) -> Response:
    """The one way the service answers with an error."""
    body = problem_document(status, title, detail, **extra)
    response = Response(json.dumps(body), status=status, mimetype=PROBLEM_JSON)
    if status == 401:
        response.headers["WWW-Authenticate"] = BEARER_CHALLENGE
    if status == 429 and "retry_after" in extra:
        response.headers["Retry-After"] = str(extra["retry_after"])
    return response


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ServiceError)
    def service_error(error: ServiceError) -> Response:
        return problem(error.status, error.title, error.detail, **error.extra)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        status = error.code or 500
        if status == 413:
            limit = app.config["MAX_UPLOAD_BYTES"]
            return problem(413, "Upload too large",
                           f"The request is larger than the {limit // 1024} KiB upload limit.")
        return problem(status, error.name, error.description or error.name)

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> Response:
        log.exception("unhandled error")
        return problem(500, "Internal server error",
                       "Something went wrong on our side; it has been logged.")
