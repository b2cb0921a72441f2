"""Webhook endpoints of a course and the deliveries owed to them (the outbox and its log)."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.base import Base, CreatedMixin, IdMixin, LeasedDeliveryMixin
from service.models.courses import Course
from service.models.submissions import Submission
from service.models.users import User, enum_column


class WebhookEndpoint(IdMixin, CreatedMixin, Base):
    """Where a course's events are posted, signed with the Standard Webhooks scheme."""

    __tablename__ = "webhook_endpoints"

    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"),
                                           index=True)
    url: Mapped[str] = mapped_column(String(2048))
    secret: Mapped[str] = mapped_column(String(64))
    """The ``whsec_`` signing secret. Kept in clear because signing needs it; shown to the
    instructor only when it is created or rotated."""
    previous_secret: Mapped[str | None] = mapped_column(String(64))
    """The secret before the last rotation: deliveries are signed with both until
    ``previous_secret_until``, so receivers can switch without losing events."""
    previous_secret_until: Mapped[datetime | None]
    events: Mapped[list[str]]
    """The event types this endpoint subscribed to (``submission.graded``, ...)."""
    active: Mapped[bool] = mapped_column(default=True)
    created_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"))

    course: Mapped[Course] = relationship()
    created_by: Mapped[User | None] = relationship()


class DeliveryStatus(enum.Enum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    """Gave up after the last attempt (a redelivery starts again)."""


class WebhookDelivery(LeasedDeliveryMixin, CreatedMixin, Base):
    """One event owed to one endpoint, retried until delivered or out of attempts."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),)

    endpoint_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), index=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    event: Mapped[str] = mapped_column(String(32))
    message_id: Mapped[str] = mapped_column(String(40), unique=True)
    """The ``webhook-id`` header: the same on every attempt, so receivers can deduplicate."""
    payload: Mapped[dict[str, Any]]
    status: Mapped[DeliveryStatus] = mapped_column(enum_column(DeliveryStatus),
                                                   default=DeliveryStatus.PENDING)
    status_enum = DeliveryStatus
    last_attempt_at: Mapped[datetime | None]
    last_status_code: Mapped[int | None]

    endpoint: Mapped[WebhookEndpoint] = relationship()
    submission: Mapped[Submission] = relationship()
