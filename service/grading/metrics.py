"""What an operator watches, in Prometheus's format: the fleet's grading read from the database
and the broker at each scrape.

Every figure comes from the records all hosts share (the submissions table, the outbox tables,
the broker's queue), not from counters kept in worker processes: a Celery worker's grading
processes come and go, and a host that dies takes its counters with it, while the database
holds each grading whatever host did it. One scrape of any web process sees the whole fleet;
hosts are told apart by the host part of a claim (``host:pid``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import ColumnElement, Float, case, cast, func, select
from sqlalchemy.orm import Session

from service.grading.waiting import VERSION_WAITING_MESSAGE, WAITING_MESSAGE
from service.models import ScorePassback, Submission, SubmissionStatus, WebhookDelivery, utcnow

log = logging.getLogger(__name__)

LATENCY_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 1800)
"""Seconds from submission to stored result: dense around the deadline objective (60 s)."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def seconds_between(session: Session, start: Any, end: Any) -> ColumnElement[float]:
    """``end - start`` in seconds, in the database's own arithmetic."""
    if session.get_bind().dialect.name == "postgresql":
        return cast(func.extract("epoch", end - start), Float)
    return cast((func.julianday(end) - func.julianday(start)) * 86400.0, Float)


def host_of(claimed_by: str | None) -> str:
    """The host part of a claim's ``host:pid``."""
    return (claimed_by or "").rpartition(":")[0] or "unknown"


class FleetCollector(Collector):
    """Computes the fleet's metrics at each scrape: ``session`` opens a database session,
    ``queue_depth`` asks the broker how many messages wait (None: unreachable)."""

    def __init__(self, session: Callable[[], Session],
                 queue_depth: Callable[[], int | None], queue: str) -> None:
        self._session = session
        self._queue_depth = queue_depth
        self._queue = queue

    def collect(self) -> Iterator[Metric]:
        depth = self._queue_depth()
        up = GaugeMetricFamily("autograde_broker_up", "1 when the broker answered this scrape.")
        up.add_metric([], 0.0 if depth is None else 1.0)
        yield up
        if depth is not None:
            messages = GaugeMetricFamily(
                "autograde_broker_queue_messages",
                "Messages ready in the broker's grading queue (not those taken by a worker).",
                labels=["queue"])
            messages.add_metric([self._queue], float(depth))
            yield messages
        session = self._session()
        try:
            yield from _submission_metrics(session)
            yield from _delivery_metrics(session)
        finally:
            session.close()


def _submission_metrics(session: Session) -> Iterator[Metric]:
    now = utcnow()
    counts = {status: int(count) for status, count in session.execute(
        select(Submission.status, func.count()).group_by(Submission.status)).all()}
    by_status = GaugeMetricFamily("autograde_submissions", "Submissions in each state.",
                                  labels=["status"])
    for status in SubmissionStatus:
        by_status.add_metric([status.value], float(counts.get(status, 0)))
    yield by_status

    oldest = session.scalar(select(func.min(Submission.requested_at))
                            .where(Submission.status == SubmissionStatus.QUEUED))
    age = GaugeMetricFamily(
        "autograde_queue_oldest_age_seconds",
        "Age of the oldest submission waiting to be graded (since it was submitted); 0 when "
        "none waits. With the depth, the signal to add grading hosts on.")
    age.add_metric([], max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
    yield age

    waiting = GaugeMetricFamily(
        "autograde_waiting_submissions",
        "Queued submissions handed back by a host, by why: no sandbox, or no host holding "
        "the assignment version they need.", labels=["reason"])
    for reason, message in (("sandbox", WAITING_MESSAGE), ("version", VERSION_WAITING_MESSAGE)):
        waiting.add_metric([reason], float(session.scalar(
            select(func.count()).where(Submission.status == SubmissionStatus.QUEUED,
                                       Submission.message == message)) or 0))
    yield waiting

    claims = session.execute(select(Submission.claimed_by, Submission.status, func.count())
                             .where(Submission.status.in_((SubmissionStatus.RUNNING,
                                                           SubmissionStatus.GRADED)))
                             .group_by(Submission.claimed_by, Submission.status)).all()
    running: dict[str, int] = {}
    graded: dict[str, int] = {}
    for claimed_by, status, count in claims:
        into = running if status is SubmissionStatus.RUNNING else graded
        into[host_of(claimed_by)] = into.get(host_of(claimed_by), 0) + int(count)
    in_flight = GaugeMetricFamily("autograde_gradings_in_progress",
                                  "Submissions being graded, by the host holding the claim.",
                                  labels=["host"])
    for host, count in sorted(running.items()):
        in_flight.add_metric([host], float(count))
    yield in_flight
    per_host = CounterMetricFamily(
        "autograde_host_graded", "Graded submissions by the host whose claim stored the "
        "result (the latest round of each).", labels=["host"])
    for host, count in sorted(graded.items()):
        per_host.add_metric([host], float(count))
    yield per_host

    outcomes = CounterMetricFamily("autograde_gradings", "Finished gradings by outcome: graded "
                                   "(a result stored) or failed (given up, with a message).",
                                   labels=["outcome"])
    outcomes.add_metric(["graded"], float(counts.get(SubmissionStatus.GRADED, 0)))
    outcomes.add_metric(["failed"], float(counts.get(SubmissionStatus.FAILED, 0)))
    yield outcomes

    yield _latency(session)


def _latency(session: Session) -> Metric:
    """Submit to result, over first-round gradings (a regrade's wait is the instructor's)."""
    latency = seconds_between(session, Submission.requested_at, Submission.graded_at)
    columns = [func.sum(case((latency <= bound, 1), else_=0)) for bound in LATENCY_BUCKETS]
    row = session.execute(select(*columns, func.count(), func.coalesce(func.sum(latency), 0.0))
                          .where(Submission.status == SubmissionStatus.GRADED,
                                 Submission.round == 1)).one()
    *cumulative, total, total_seconds = row
    buckets = [(_bucket(bound), float(count or 0))
               for bound, count in zip(LATENCY_BUCKETS, cumulative, strict=True)]
    buckets.append(("+Inf", float(total or 0)))
    histogram = HistogramMetricFamily(
        "autograde_submission_to_result_seconds",
        "Seconds from a submission to its stored result (first round).")
    histogram.add_metric([], buckets, sum_value=float(total_seconds or 0.0))
    return histogram


def _bucket(bound: float) -> str:
    return str(float(bound))


def _delivery_metrics(session: Session) -> Iterator[Metric]:
    family = GaugeMetricFamily(
        "autograde_deliveries", "Webhook and LMS-score deliveries not delivered: pending "
        "(not sent yet or waiting to retry), failing (pending after a failed attempt), failed "
        "(given up).", labels=["channel", "state"])
    for channel, model in (("webhook", WebhookDelivery), ("lms-score", ScorePassback)):
        pending, failing, failed = _delivery_counts(session, model)
        family.add_metric([channel, "pending"], float(pending))
        family.add_metric([channel, "failing"], float(failing))
        family.add_metric([channel, "failed"], float(failed))
    yield family


def _delivery_counts(session: Session, model: Any) -> Sequence[int]:
    status = model.status_enum
    pending = model.status == status.PENDING
    row = session.execute(select(
        func.sum(case((pending, 1), else_=0)),
        func.sum(case((pending & (model.attempts > 0), 1), else_=0)),
        func.sum(case((model.status == status.FAILED, 1), else_=0)))).one()
    return [int(value or 0) for value in row]


def exposition(collector: Collector) -> bytes:
    """One scrape's text of ``collector``'s metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


def token_matches(expected: str | None, authorization: str | None) -> bool:
    """Whether ``authorization`` (a request's header) is ``Bearer <expected>``; False when no
    token is configured."""
    if not expected:
        return False
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(),
                                                                 expected.encode())
