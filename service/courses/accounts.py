"""Accounts: users, argon2 passwords, and bearer tokens stored only as their SHA-256."""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Unauthorized
from service.models import ApiToken, Role, User, utcnow

TOKEN_PREFIX = "ag_"
_HASHER = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """A real hash to verify against when the user does not exist, so timing does not tell.
    Made on first use, not at import: hashing is slow by design (and takes 64 MiB)."""
    return _HASHER.hash("no such user")


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def create_user(session: Session, *, username: str, password: str, role: Role = Role.STUDENT,
                display_name: str = "") -> User:
    if session.scalar(select(User).where(User.username == username)) is not None:
        raise Conflict(f"A user called {username!r} already exists.")
    if len(password) < 8:
        raise Conflict("Passwords have at least 8 characters.", status=400, title="Bad request")
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
