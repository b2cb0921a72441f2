"""Who is logged in to the web pages: a server-side session named by a random key in the signed
session cookie. Logging out deletes the session, so a copied cookie stops working with it."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import ParamSpec, TypeVar

from flask import redirect, request, session, url_for
from sqlalchemy import delete, select
from werkzeug.wrappers import Response

from service.core.db import session as db_session
from service.models import User, WebSession, utcnow

_CACHE = "autograde.web_user"
P = ParamSpec("P")
R = TypeVar("R")


SESSION_HOURS = 12
"""A web session ends this long after its login at the latest (the cookie ends with the
browser's session)."""


def log_in(user: User) -> None:
    """Start a server-side session for ``user`` (committed) and name it in the cookie."""
    db = db_session()
    now = utcnow()
    db.execute(delete(WebSession).where(WebSession.user_id == user.id,
                                        WebSession.expires_at < now))
    key = secrets.token_urlsafe(32)
    db.add(WebSession(key_hash=_hash(key), user_id=user.id,
                      expires_at=now + timedelta(hours=SESSION_HOURS)))
    db.commit()
    session.clear()  # a fresh session at login: no fixation
    session["sid"] = key
    session.permanent = False


def log_out() -> None:
    """End the session on the server (every copy of the cookie), then in this browser."""
    key = session.get("sid")
    if isinstance(key, str):
        db_session().execute(delete(WebSession).where(WebSession.key_hash == _hash(key)))
        db_session().commit()
    session.clear()


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _session_user(key: object) -> User | None:
    if not isinstance(key, str) or len(key) > 128:
        return None
    found = db_session().scalar(select(WebSession).where(WebSession.key_hash == _hash(key)))
    if found is None or found.expires_at < utcnow():
        return None
    return found.user


def web_user() -> User | None:
    """The logged-in user of this request, or None (an inactive account counts as logged out)."""
    # Cached on the request (not on ``g``, which an app context may share between requests).
    if _CACHE not in request.environ:
        user = _session_user(session.get("sid"))
        request.environ[_CACHE] = user if user is not None and user.active else None
    found: User | None = request.environ[_CACHE]
    return found


def page_user() -> User:
    """The logged-in user of a view wrapped in ``login_page``."""
    user = web_user()
    assert user is not None
    return user


def login_page(view: Callable[P, R]) -> Callable[P, R | Response]:
    """Pages for logged-in users; others go to the login page and come back after."""

    @wraps(view)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R | Response:
        if web_user() is None:
            return redirect(url_for("web.login", next=request.full_path.rstrip("?")))
        return view(*args, **kwargs)

    return wrapped
