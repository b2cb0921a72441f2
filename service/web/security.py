"""Web security: the session key and cookie, CSRF, response headers, login throttling."""

from __future__ import annotations

import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

from flask import Flask, Request, Response, request
from flask.sessions import SecureCookieSessionInterface
from flask_wtf.csrf import CSRFProtect
from limits import RateLimitItem, parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from service.core.extensions import Shared

log = logging.getLogger(__name__)

WEB_DEFAULTS: dict[str, Any] = {
    # Failed logins allowed per client address in the window (then 429 for that address); past
    # as many failures on one account, each login to it waits LOGIN_ACCOUNT_DELAY_SECONDS first
    # (slowed, never locked: an attacker cannot lock the real user out).
    "LOGIN_LIMIT": "10 per 5 minutes",
    "LOGIN_ACCOUNT_DELAY_SECONDS": 2.0,
    # memory:// counts per server process; a redis:// broker is shared by all of them.
    "LOGIN_LIMIT_STORAGE": None,
}

# Pages load scripts and styles only from the app itself: even a missed escape cannot run code.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                           "frame-ancestors 'none'; form-action 'self'")


def configure_web_security(app: Flask, csrf: CSRFProtect) -> None:
    for name, value in WEB_DEFAULTS.items():
        app.config.setdefault(name, os.environ.get(f"AUTOGRADE_{name}", value))
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = _persistent_secret_key(app.config["DATABASE_URL"])
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Lax",
                      SESSION_COOKIE_NAME="autograde_session", WTF_CSRF_TIME_LIMIT=None)
    app.session_interface = HttpsAwareSessionInterface()
    csrf.init_app(app)
    login_throttle.install(app, LoginThrottle(
        app.config["LOGIN_LIMIT"], app.config["LOGIN_LIMIT_STORAGE"]
        or _shared_storage(str(app.config.get("BROKER_URL", ""))),
        float(app.config["LOGIN_ACCOUNT_DELAY_SECONDS"])))


class HttpsAwareSessionInterface(SecureCookieSessionInterface):
    """The session cookie is ``Secure`` whenever the request came over HTTPS (or config says)."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or _is_secure(request)


def _is_secure(current: Request) -> bool:
    return current.is_secure


def security_headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def _persistent_secret_key(database_url: str) -> str:
    """A key kept beside a SQLite database (or in ./.autograde), shared by all server processes.

    Production sets ``AUTOGRADE_SECRET_KEY``; this keeps the embedded default working without it.
    """
    embedded = database_url.startswith("sqlite") and ":memory:" not in database_url
    folder = Path(database_url.split("///", 1)[-1]).parent if embedded else Path(".autograde")
    if not embedded:
        log.warning("AUTOGRADE_SECRET_KEY is not set: web sessions are signed with a key kept "
                    "in %s; set the variable when several servers share one database", folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "secret-key"
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_hex(32))
    return path.read_text().strip()


def _shared_storage(broker_url: str) -> str:
    return broker_url if broker_url.startswith(("redis://", "rediss://")) else "memory://"


class LoginThrottle:
    """Failed logins, web and API alike: counted per client address (an address over the limit
    is refused with 429 before any password is checked) and per account (an account over the
    limit is slowed by a fixed delay per attempt, never locked, so someone guessing from many
    addresses cannot keep its owner out)."""

    def __init__(self, limit: str, storage_uri: str, account_delay_seconds: float = 2.0) -> None:
        self.limit: RateLimitItem = parse(limit)
        self.window = MovingWindowRateLimiter(storage_from_string(storage_uri))
        self.account_delay_seconds = account_delay_seconds

    @staticmethod
    def _address_key(address: str) -> str:
        return f"login-address:{address}"

    @staticmethod
    def _account_key(username: str) -> str:
        return f"login-user:{username.lower()[:128]}"

    def refused_for(self, address: str) -> int | None:
        """Seconds until this address may try again, or None when it may now."""
        key = self._address_key(address)
        if self.window.test(self.limit, key):
            return None
        reset = self.window.get_window_stats(self.limit, key).reset_time
        return max(1, int(reset - time.time()))

    def account_delay(self, username: str) -> float:
        """How long a login to this account waits before its password is checked."""
        return 0.0 if self.window.test(self.limit, self._account_key(username)) \
            else self.account_delay_seconds

    def failed(self, address: str, username: str) -> None:
        self.window.hit(self.limit, self._address_key(address))
        self.window.hit(self.limit, self._account_key(username))


login_throttle: Shared[LoginThrottle] = Shared("autograde.login_throttle")
"""Failed logins counted per address and account, for the current app."""


def throttled_authenticate(username: str, password: str) -> Any:
    """``authenticate`` behind the login throttle: TooManyLogins (429) for an address with too
    many failures, a delay for an account with too many, Unauthorized for a wrong password."""
    from service.core.db import session
    from service.core.errors import ServiceError, Unauthorized
    from service.courses.accounts import authenticate

    throttle = login_throttle()
    address = request.remote_addr or "-"
    wait = throttle.refused_for(address)
    if wait is not None:
        raise ServiceError(f"Too many failed logins from your address; try again in {wait} s.",
                           status=429, title="Too many failed logins", retry_after=wait)
    delay = throttle.account_delay(username)
    if delay:
        time.sleep(delay)
    try:
        return authenticate(session(), username=username, password=password)
    except Unauthorized:
        throttle.failed(address, username)
        raise
