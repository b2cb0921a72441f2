"""Small request helpers shared by the blueprints: JSON bodies and query parameters."""

from __future__ import annotations

from typing import Any

from flask import request

from service.core.edge import loads_checked
from service.core.errors import ServiceError, UnsupportedMedia


def json_body(*required: str) -> dict[str, Any]:
    if not request.is_json:
        raise UnsupportedMedia("Send a JSON body (Content-Type: application/json).")
    try:
        body = loads_checked(request.get_data(cache=True))
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, InputError
        raise ServiceError(f"The body is not acceptable JSON: {exc}"[:300]) from None
    if not isinstance(body, dict):
        raise ServiceError("The body is not a JSON object.")
    missing = [name for name in required if not isinstance(body.get(name), str) or not body[name]]
    if missing:
        raise ServiceError(f"Missing or empty field(s): {', '.join(missing)}.")
    return body


def int_arg(name: str, default: int, *, low: int = 0, high: int = 1000) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ServiceError(f"Query parameter `{name}` must be an integer.") from None
    if not low <= value <= high:
        raise ServiceError(f"Query parameter `{name}` must be between {low} and {high}.")
    return value
