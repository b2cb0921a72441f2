"""Declarative base, column types and small mixins shared by every aggregate."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, DateTime, MetaData, String, Text, TypeDecorator
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime; use service.models.base.utcnow()")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[str]: JSON(),
    }


class IdMixin:
    id: Mapped[int] = mapped_column(primary_key=True)


class LeasedDeliveryMixin(IdMixin):
    """Something owed to the outside world, sent by a task with retries
    (``service.grading.outbox``): one sender at a time holds a lease on it; the periodic sweep
    sends what is due.

    The model declares its own ``status`` column and names its enum in ``status_enum``, whose
    ``pending``, ``delivered`` and ``failed`` members the engine uses."""

    status_enum: ClassVar[type[enum.Enum]]

    attempts: Mapped[int] = mapped_column(default=0)
    """Attempts of the current round (an instructor's "send again" starts a new round)."""
    next_attempt_at: Mapped[datetime | None]
    """When the next attempt is due (after a failed one, the backoff)."""
    lease_token: Mapped[str | None] = mapped_column(String(32))
    """The claim of the task sending it now (compare-and-set: one sender at a time)."""
    lease_expires_at: Mapped[datetime | None]
    """When a claim whose task died is presumed lost, and the delivery free again."""
    last_error: Mapped[str | None] = mapped_column(Text)
    """What went wrong last, short; never a token, secret or response body."""
    dispatched_at: Mapped[datetime | None] = mapped_column(default=None)
    """When the task that will send it was sent, or is due to run (a retry's countdown)."""
    delivered_at: Mapped[datetime | None]


class CreatedMixin:
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
