"""Who is logged in to the web pages: a server-side session named by a random key in the signed
session cookie. The server ends sessions (logout, a password change, an administrator; or their
time is up), so a copied or replayed cookie stops working, and the next page says when the
session ended and why."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from typing import ParamSpec, TypeVar

from flask import current_app, flash, redirect, request, session, url_for
from sqlalchemy import delete, or_, select, update
from werkzeug.wrappers import Response

from service.core.db import database
from service.core.db import session as db_session
from service.models import SessionEnd, User, WebSession, utcnow

_CACHE = "autograde.web_user"
P = ParamSpec("P")
R = TypeVar("R")

KEEP_ENDED_DAYS = 7
"""Ended sessions are kept this long, to tell a browser that comes back why it was signed out."""
_SEEN_EVERY = timedelta(minutes=1)

_WHY = {
    SessionEnd.LOGOUT: "you signed out, in this session or from another of yours",
    SessionEnd.PASSWORD: "the account's password was changed",
    SessionEnd.ADMIN: "an administrator signed the account out everywhere",
}


def log_in(user: User) -> None:
    """Start a server-side session for ``user`` (committed) and name it in the cookie."""
    db = db_session()
    now = utcnow()
    forgotten = now - timedelta(days=KEEP_ENDED_DAYS)
    db.execute(delete(WebSession).where(WebSession.user_id == user.id, or_(
        WebSession.expires_at < forgotten, WebSession.ended_at < forgotten)))
    key = secrets.token_urlsafe(32)
    hours = float(current_app.config["SESSION_HOURS"])
    db.add(WebSession(key_hash=session_hash(key), user_id=user.id, last_seen_at=now,
                      expires_at=now + timedelta(hours=hours)))
    db.commit()
    session.clear()  # a fresh session at login: no fixation
    session["sid"] = key
    session.permanent = False


def log_out() -> None:
    """End the session on the server (every copy of the cookie), then in this browser."""
    key = session.get("sid")
    if isinstance(key, str):
        db_session().execute(update(WebSession).where(
            WebSession.key_hash == session_hash(key), WebSession.ended_at.is_(None))
            .values(ended_at=utcnow(), ended_by=SessionEnd.LOGOUT))
        db_session().commit()
    session.clear()


def session_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def current_session_hash() -> str | None:
    """The key hash of this browser's session (to keep it when ending the others)."""
    key = session.get("sid")
    return session_hash(key) if isinstance(key, str) else None


def _at(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _ended(found: WebSession, now: datetime) -> str | None:
    """Why a session is over, said to its browser, or None while it lasts."""
    idle = timedelta(minutes=float(current_app.config["SESSION_IDLE_MINUTES"]))
    if found.ended_at is not None:
        why = _WHY.get(found.ended_by or SessionEnd.LOGOUT, "it was ended")
        return f"You were signed out at {_at(found.ended_at)}: {why}."
    if found.expires_at < now:
        hours = float(current_app.config["SESSION_HOURS"])
        return (f"You were signed out at {_at(found.expires_at)}: a session lasts at most "
                f"{hours:g} hours after signing in.")
    seen = found.last_seen_at or found.created_at
    if seen + idle < now:
        return (f"You were signed out at {_at(seen + idle)}, after "
                f"{int(idle.total_seconds() // 60)} minutes without activity.")
    if not found.user.active:
        return "You were signed out: the account is disabled; ask an administrator."
    return None


def _session_user(key: object) -> User | None:
    if not isinstance(key, str) or len(key) > 128:
        return None
    found = db_session().scalar(select(WebSession).where(WebSession.key_hash == session_hash(key)))
    now = utcnow()
    why = "Your session is over; sign in again." if found is None else _ended(found, now)
    if why is not None:
        session.pop("sid", None)  # said once: the next page does not say it again
        flash(why, "info")
        return None
    assert found is not None
    if found.last_seen_at is None or now - found.last_seen_at > _SEEN_EVERY:
        # On a connection of its own: the request's session may hold the view's changes.
        with database().engine.begin() as connection:
            connection.execute(update(WebSession).where(WebSession.id == found.id)
                               .values(last_seen_at=now))
    return found.user


def web_user() -> User | None:
    """The logged-in user of this request, or None (an ended session or an inactive account
    counts as logged out, and the page says why)."""
    # Cached on the request (not on ``g``, which an app context may share between requests).
    if _CACHE not in request.environ:
        request.environ[_CACHE] = _session_user(session.get("sid")) if "sid" in session \
            else None
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
