"""Input checked where it enters: JSON bodies, URL ids, text fields. Whatever fails gets a 400
with what was wrong, before it can reach the database or a parser's recursion limit.

- JSON: nesting at most ``MAX_JSON_DEPTH`` deep, numbers finite (no ``1e999``, ``NaN`` or
  ``Infinity``), integers of at most ``MAX_INT_DIGITS`` digits, no NUL and no lone surrogate
  in any string (PostgreSQL stores neither).
- URL ``<int:...>`` ids: within the database's 32-bit integer (a larger id names nothing: 404).
- The query and form fields: no NUL, no lone surrogate (400). A path holding one names nothing
  (404, as any other unknown name).

And on the way out, text stored before these checks (or from a sandbox) that cannot be encoded
is replaced in pages (``replace_unstorable``), never a failed page.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from flask import Flask, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.routing import IntegerConverter

from service.core.errors import NotFound, ServiceError
from service.core.visible import show_invisible

MAX_JSON_DEPTH = 32
MAX_INT_DIGITS = 18
MAX_DB_INT = 2**31 - 1

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class InputError(ValueError):
    """A request part that cannot be accepted: its message says what and why."""


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored as text, or None when it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return "a NUL character" if found.group() == "\x00" else "a lone surrogate (invalid Unicode)"


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings skipped)."""
    depth = deepest = 0
    for bracket in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise InputError(f"the number {literal[:40]} is out of range")
    return value


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise InputError(f"an integer of {len(literal.lstrip('-'))} digits is out of range "
                         f"(at most {MAX_INT_DIGITS})")
    return int(literal)


def _no_constant(name: str) -> Any:
    raise InputError(f"{name} is not a JSON number")


def _checked_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    for key, value in pairs:
        for text in (key, value) if isinstance(value, str) else (key,):
            reason = unstorable(text)
            if reason:
                raise InputError(f"the field {key!r} holds {reason}"[:200])
    return dict(pairs)


def _checked_strings(value: Any) -> None:
    """Strings directly in arrays (objects check theirs as they are built)."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, str) and unstorable(item):
                raise InputError(f"a string holds {unstorable(item)}")
            _checked_strings(item)
    elif isinstance(value, str) and unstorable(value):
        raise InputError(f"the string holds {unstorable(value)}")


def loads_checked(text: str | bytes) -> Any:
    """``json.loads`` within the bounds above; InputError (a ValueError) otherwise."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise InputError(f"it nests {depth} levels deep; at most {MAX_JSON_DEPTH} are accepted")
    value = json.loads(text, parse_float=_finite_float, parse_int=_bounded_int,
                       parse_constant=_no_constant, object_pairs_hook=_checked_object)
    _checked_strings(value)
    return value


class CheckedJSONProvider(DefaultJSONProvider):
    """Flask's JSON, reading request bodies through ``loads_checked``."""

    sort_keys = False

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads_checked(s)


class DatabaseIntConverter(IntegerConverter):
    """``<int:...>`` limited to what an INTEGER column holds: a larger id is simply not found."""

    def __init__(self, map: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max", MAX_DB_INT)
        super().__init__(map, *args, **kwargs)


def install_edge_checks(app: Flask) -> None:
    """Call first in ``create_app``: the converter must be in place before any route."""
    app.json = CheckedJSONProvider(app)
    app.url_map.converters["int"] = DatabaseIntConverter
    app.jinja_env.finalize = _finalize
    app.before_request(_check_text_fields)


def _check_text_fields() -> None:
    reason = unstorable(request.path)
    if reason:
        raise NotFound(f"Nothing here has a name holding {reason}.")
    fields: list[tuple[str, str]] = [(f"the query parameter {name!r}", value)
               for name, value in request.args.items(multi=True)]
    fields += [(f"the query parameter name {name!r}", name) for name in request.args]
    if request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        fields += [(f"the form field {name!r}", value)
                   for name, value in request.form.items(multi=True)]
    for where, text in fields:
        reason = unstorable(text)
        if reason:
            raise ServiceError(f"{where[:120]} holds {reason}; remove it and send again.")


def replace_unstorable(value: Any) -> Any:
    """``value`` (JSON-like) with lone surrogates and NULs in its strings replaced by U+FFFD, so
    that it can be stored, encoded and shown anywhere (text that came from a sandbox)."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value) if _UNSTORABLE.search(value) else value
    if isinstance(value, dict):
        return {replace_unstorable(k): replace_unstorable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [replace_unstorable(item) for item in value]
    return value


def _finalize(value: Any) -> Any:
    """What every ``{{ ... }}`` of a template shows: stored text that cannot be encoded (a lone
    surrogate) is replaced instead of failing the page, and invisible or reordering characters
    are shown as marks (``service.core.visible``). Markup stays Markup."""
    if not isinstance(value, str):
        return value
    if _UNSTORABLE.search(value):
        value = type(value)(_UNSTORABLE.sub("\ufffd", value))
    return show_invisible(value)
