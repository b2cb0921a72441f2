"""Who is logged in to the web pages: the user id in the signed session cookie."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from flask import redirect, request, session, url_for
from werkzeug.wrappers import Response

from service.db import session as db_session
from service.models import User

_CACHE = "autograde.web_user"
P = ParamSpec("P")
R = TypeVar("R")


def log_in(user: User) -> None:
    session.clear()  # a fresh session at login: no fixation
    session["user_id"] = user.id
    session.permanent = False


def log_out() -> None:
    session.clear()


def web_user() -> User | None:
    """The logged-in user of this request, or None (an inactive account counts as logged out)."""
    # Cached on the request (not on ``g``, which an app context may share between requests).
    if _CACHE not in request.environ:
        user_id = session.get("user_id")
        user = db_session().get(User, user_id) if isinstance(user_id, int) else None
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
