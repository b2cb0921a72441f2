"""Accounts: users with a global role and argon2 password hashes, and their API tokens."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.base import Base, CreatedMixin, IdMixin


class Role(enum.Enum):
    STUDENT = "student"
    INSTRUCTOR = "instructor"
    ADMIN = "admin"


def enum_column(kind: type[enum.Enum]) -> Enum:
    """Enums stored by value as short strings with a CHECK, identical on every backend."""
    return Enum(kind, native_enum=False, length=16, create_constraint=True,
                values_callable=lambda members: [member.value for member in members],
                name=kind.__name__.lower())


class User(IdMixin, CreatedMixin, Base):
    __tablename__ = "users"

    username: Mapped[str] = mapped_column(String(64), unique=True)
    display_name: Mapped[str] = mapped_column(String(128), default="")
    role: Mapped[Role] = mapped_column(enum_column(Role), default=Role.STUDENT)
    password_hash: Mapped[str] = mapped_column(String(255))
    """argon2id hash (never the password)."""
    active: Mapped[bool] = mapped_column(default=True)

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user")


class ApiToken(IdMixin, CreatedMixin, Base):
    """A bearer token; only its SHA-256 is stored, so the token is shown once, at creation."""

    __tablename__ = "api_tokens"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(12))
    """The first characters, so a user can tell tokens apart when revoking one."""
    name: Mapped[str] = mapped_column(String(64), default="")
    expires_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]

    user: Mapped[User] = relationship(back_populates="tokens")


class SessionEnd(enum.Enum):
    """Why the server ended a web session before it expired."""

    LOGOUT = "logout"
    PASSWORD = "password"
    """The account's password was changed (by its owner elsewhere, or by an administrator)."""
    ADMIN = "admin"
    """An administrator signed the account out everywhere."""


class WebSession(IdMixin, CreatedMixin, Base):
    """A logged-in browser: the cookie holds a random key, only its SHA-256 is stored. The
    server ends it (logout, a password change, an administrator) by marking the row, so every
    copy of the cookie stops working and the page can say when and why."""

    __tablename__ = "web_sessions"

    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    expires_at: Mapped[datetime]
    """The latest end: this long after the login, whatever the activity."""
    last_seen_at: Mapped[datetime | None]
    """The last request (to the minute): the session ends after a while without one."""
    ended_at: Mapped[datetime | None]
    ended_by: Mapped[SessionEnd | None] = mapped_column(enum_column(SessionEnd))

    user: Mapped[User] = relationship()
