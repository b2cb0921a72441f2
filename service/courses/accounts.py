"""Accounts: users, argon2 passwords, and bearer tokens stored only as their SHA-256."""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from service.core.db import rows_changed
from service.core.errors import Conflict, ServiceError, Unauthorized
from service.models import ApiToken, Role, SessionEnd, User, WebSession, utcnow

TOKEN_PREFIX = "ag_"
_HASHER = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """A real hash to verify against when the user does not exist, so timing does not tell.
    Made on first use, not at import: hashing is slow by design (and takes 64 MiB)."""
    return _HASHER.hash("no such user")


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


MIN_PASSWORD = 8


def _check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise ServiceError(f"Passwords have at least {MIN_PASSWORD} characters.")


def create_user(session: Session, *, username: str, password: str, role: Role = Role.STUDENT,
                display_name: str = "") -> User:
    if session.scalar(select(User).where(User.username == username)) is not None:
        raise Conflict(f"A user called {username!r} already exists.")
    _check_password(password)
    user = User(username=username, password_hash=hash_password(password), role=role,
                display_name=display_name or username)
    session.add(user)
    session.flush()
    return user


def authenticate(session: Session, *, username: str, password: str) -> User:
    """The user with these credentials; Unauthorized otherwise (same message either way)."""
    user = session.scalar(select(User).where(User.username == username))
    try:
        _HASHER.verify(user.password_hash if user else _dummy_hash(), password)
    except (VerificationError, InvalidHashError):
        user = None
    if user is None or not user.active:
        raise Unauthorized("Unknown user name or wrong password.")
    if _HASHER.check_needs_rehash(user.password_hash):
        user.password_hash = hash_password(password)
    return user


def end_web_sessions(session: Session, user: User, why: SessionEnd, *,
                     keep: str | None = None) -> int:
    """End every live web session of ``user`` on the server (all copies of their cookies), but
    the one whose key hash is ``keep``; how many."""
    now = utcnow()
    statement = update(WebSession).where(
        WebSession.user_id == user.id, WebSession.ended_at.is_(None),
        WebSession.expires_at > now).values(ended_at=now, ended_by=why)
    if keep is not None:
        statement = statement.where(WebSession.key_hash != keep)
    return rows_changed(session, statement)


def live_web_sessions(session: Session, user: User) -> int:
    """How many web sessions of ``user`` the server has not ended (nor timed out at the
    latest end)."""
    return int(session.scalar(select(func.count()).select_from(WebSession).where(
        WebSession.user_id == user.id, WebSession.ended_at.is_(None),
        WebSession.expires_at > utcnow())) or 0)


def change_password(session: Session, user: User, *, current: str, new: str,
                    keep: str | None = None) -> int:
    """The owner's password change: the current password checked, the new one set, and every
    other web session of theirs ended (``keep``: the key hash of the one they changed it in);
    how many sessions ended."""
    try:
        _HASHER.verify(user.password_hash, current)
    except (VerificationError, InvalidHashError):
        raise Unauthorized("The current password is wrong.") from None
    return set_password(session, user, new, keep=keep)


def set_password(session: Session, user: User, password: str, *, keep: str | None = None) -> int:
    """A new password for ``user`` (an administrator's, or the owner's through
    ``change_password``), ending their web sessions but ``keep``; how many ended."""
    _check_password(password)
    user.password_hash = hash_password(password)
    return end_web_sessions(session, user, SessionEnd.PASSWORD, keep=keep)


@dataclass(frozen=True)
class IssuedToken:
    token: str
    """The bearer token itself: shown once, never stored."""
    record: ApiToken


def issue_token(session: Session, user: User, *, name: str = "", days: int = 90) -> IssuedToken:
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = ApiToken(user=user, token_hash=token_digest(token), prefix=token[:10], name=name,
                      expires_at=utcnow() + timedelta(days=days))
    session.add(record)
    session.flush()
    return IssuedToken(token, record)


def token_digest(token: str) -> str:
    # Tokens carry 256 random bits: a fast hash is enough (no dictionary to attack).
    return hashlib.sha256(token.encode()).hexdigest()


def user_for_token(session: Session, token: str) -> tuple[User, ApiToken]:
    record = session.scalar(select(ApiToken).where(ApiToken.token_hash == token_digest(token)))
    now = utcnow()
    if (record is None or record.revoked_at is not None
            or (record.expires_at is not None and record.expires_at < now)
            or not record.user.active):
        raise Unauthorized("The token is unknown, expired or revoked; log in again "
                           "(`autograde login`).")
    if record.last_used_at is None or now - record.last_used_at > timedelta(minutes=5):
        record.last_used_at = now
    return record.user, record


def revoke_token(record: ApiToken) -> None:
    record.revoked_at = record.revoked_at or utcnow()
