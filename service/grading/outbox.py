"""The delivery engine of every outbox channel (webhook events, scores to the LMS).

A channel records its deliveries with the result (``service.grading.events``); from there each
one goes through the same steps here: the periodic sweep or the send after a commit dispatches
its task once (``dispatch_due``); the task claims it with a lease, so only one sender at a time
holds it (``attempt``); the channel's ``Courier`` sends it; the outcome is recorded only under
the lease still held, then delivered, retried after a backoff, or given up. What a channel adds
is only what differs: what it sends and how (signing and payload; a token and the score to
send).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import ColumnElement, and_, or_, select, update
from sqlalchemy.orm import Session

from service.core.db import rows_changed
from service.models import utcnow
from service.models.base import LeasedDeliveryMixin

log = logging.getLogger(__name__)

EARLY_SLACK = timedelta(seconds=0.5)
"""A countdown task may run this much before its delivery is due (timer granularity)."""


def backoff(attempts: int, *, base_seconds: float, cap_seconds: float) -> float:
    """Seconds to wait after failed attempt number ``attempts`` (1, 2, ...): doubling, capped."""
    return float(min(cap_seconds, base_seconds * 2 ** min(max(attempts - 1, 0), 64)))


@dataclass(frozen=True)
class RetryPolicy:
    base_seconds: float
    cap_seconds: float
    max_attempts: int
    countdown_limit_seconds: float
    """Retries due later than this are left to the periodic sweep, not held by a worker as
    countdown tasks (Redis would redeliver a task held past its visibility timeout)."""

    def backoff(self, attempts: int) -> float:
        return backoff(attempts, base_seconds=self.base_seconds, cap_seconds=self.cap_seconds)


@dataclass(frozen=True)
class Outcome:
    """What one run of a delivery task did."""

    status: str
    """``delivered``; the channel's word for a retry (``Courier.retrying``); ``failed`` (gave
    up); ``skipped`` (not this task's: claimed elsewhere, not due, or done); or a state the
    channel settled itself (``held``)."""
    retry_in: float | None = None
    """Seconds until the retry, when the task should schedule it itself (a countdown)."""


@dataclass(frozen=True)
class Sent:
    """What a courier's send did: delivered when ``error`` is None."""

    error: str | None = None
    """Short, without secrets (``HTTP 500``, ``timed out``)."""
    permanent: bool = False
    """Trying again cannot help: give up now."""
    columns: Mapping[str, Any] = field(default_factory=dict)
    """The channel's own columns to record with the outcome (status code, score sent)."""


@dataclass(frozen=True)
class Settled:
    """The courier decided without sending: the delivery is recorded with ``columns`` (its
    status among them; ``attempts`` too, when this one should not count)."""

    outcome: str
    columns: Mapping[str, Any]


class Courier(Protocol):
    """What a channel's deliveries differ in; the rest is this module's."""

    @property
    def model(self) -> type[LeasedDeliveryMixin]:
        """The deliveries' table."""

    label: str
    """How logs name one delivery (``webhook delivery``)."""
    retrying: str
    """The outcome's word for a retry."""
    retry: RetryPolicy
    lease: timedelta
    """How long an attempt in flight keeps its delivery from being sent again."""

    def stamp(self, now: datetime, *, claimed: bool) -> dict[str, Any]:
        """The channel's columns written with every claim and outcome (``updated_at``)."""

    def send(self, session: Session, delivery: Any) -> Sent | Settled:
        """Send one claimed delivery; never raises for a failure of the destination."""


def due(model: type[LeasedDeliveryMixin], now: datetime) -> ColumnElement[bool]:
    """Pending, due, and no live lease on it."""
    table: Any = model
    return and_(table.status == model.status_enum("pending"), table.next_attempt_at <= now,
                table.lease_expires_at.is_(None) | (table.lease_expires_at < now))


def dispatch_due(session: Session, model: type[LeasedDeliveryMixin],
                 condition: ColumnElement[bool], *, now: datetime, redispatch_seconds: float,
                 send: Callable[[int], None], limit: int = 1000) -> int:
    """Send the task of every ``model`` row matching ``condition`` whose task was never sent,
    or was sent so long ago that it must have been lost; how many were sent.

    Each row is taken by a compare-and-set on ``dispatched_at``, so the sweep, the send after a
    commit and an instructor's "send again" never queue the same delivery twice at once (the
    tasks are idempotent anyway; this keeps a backed-up queue from filling with copies).
    """
    column: Any = model.dispatched_at
    stale = now - timedelta(seconds=redispatch_seconds)
    rows = session.execute(
        select(model.id, column).where(condition, or_(column.is_(None), column < stale))
        .order_by(model.id).limit(limit)).all()
    sent = 0
    for row_id, dispatched in rows:
        same = column.is_(None) if dispatched is None else column == dispatched
        claimed = rows_changed(session, update(model).where(model.id == row_id, same)
                               .values(dispatched_at=now))
        session.commit()
        if claimed == 1:
            send(row_id)
            sent += 1
    return sent


def attempt(session: Session, courier: Courier, delivery_id: int) -> Outcome:
    """One attempt at one delivery, if it is pending, due and free; only the task holding the
    lease sends, and records what happened only while the lease is still its own (a "send
    again" meanwhile starts a round this attempt no longer belongs to)."""
    model: Any = courier.model
    now = utcnow()
    lease = secrets.token_hex(16)
    claimed = rows_changed(session, update(model).where(
        model.id == delivery_id, model.status == model.status_enum("pending"),
        model.next_attempt_at.is_(None) | (model.next_attempt_at <= now + EARLY_SLACK),
        model.lease_expires_at.is_(None) | (model.lease_expires_at < now))
        .values(lease_token=lease, lease_expires_at=now + courier.lease,
                attempts=model.attempts + 1, **courier.stamp(now, claimed=True)))
    session.commit()
    if claimed != 1:
        return Outcome("skipped")
    delivery = session.get(model, delivery_id, populate_existing=True)
    assert delivery is not None
    sent = courier.send(session, delivery)
    if isinstance(sent, Settled):
        _finish(session, courier, delivery_id, lease, sent.columns)
        return Outcome(sent.outcome)
    return _record(session, courier, delivery, lease, sent)


def _record(session: Session, courier: Courier, delivery: Any, lease: str,
            sent: Sent) -> Outcome:
    statuses = courier.model.status_enum
    number = delivery.attempts
    values: dict[str, Any] = {**sent.columns, "last_error": sent.error, "dispatched_at": None}
    retry_in: float | None = None
    delay = 0.0
    if sent.error is None:
        values.update(status=statuses("delivered"), delivered_at=utcnow())
        outcome = "delivered"
    elif sent.permanent or number >= courier.retry.max_attempts:
        values["status"] = statuses("failed")
        outcome = "failed"
    else:
        delay = courier.retry.backoff(number)
        values["next_attempt_at"] = utcnow() + timedelta(seconds=delay)
        # A short wait is the task's own countdown (it holds the dispatch until then); a long
        # one is left to the periodic sweep.
        if delay <= courier.retry.countdown_limit_seconds:
            values["dispatched_at"], retry_in = values["next_attempt_at"], delay
        outcome = courier.retrying
    kept = _finish(session, courier, delivery.id, lease, values)
    session.expire(delivery)  # changed by UPDATE statements, not through the object
    if outcome == "failed":
        log.warning("%s %s failed for good after %s attempt(s): %s", courier.label, delivery.id,
                    number, sent.error)
    elif sent.error is not None:
        log.info("%s %s: attempt %s failed (%s); again in %s s", courier.label, delivery.id,
                 number, sent.error, delay)
    else:
        log.info("%s %s: delivered at attempt %s", courier.label, delivery.id, number)
    if not kept:  # sent again meanwhile: the new round owns the row now
        return Outcome("skipped")
    return Outcome(outcome, retry_in)


def _finish(session: Session, courier: Courier, delivery_id: int, lease: str,
            values: Mapping[str, Any]) -> bool:
    """Record an attempt's end and free the lease, if it is still this attempt's."""
    model: Any = courier.model
    kept = rows_changed(session, update(model).where(
        model.id == delivery_id, model.lease_token == lease).values(
        lease_token=None, lease_expires_at=None,
        **{**courier.stamp(utcnow(), claimed=False), **values}))
    session.commit()
    return kept == 1
