"""Migration 0007 (one outbox shape) on a real PostgreSQL database with deliveries in flight:
every webhook delivery and score passback survives the way down and back up, and one that a
sender held when the schema changed is still kept from a second sender."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Flask
from sqlalchemy import create_engine, select, text

from devkit.courses import Factory
from service.core import db
from service.grading.outbox import due
from service.models import (
    DeliveryStatus,
    LtiContext,
    LtiPlatform,
    LtiResourceLink,
    LtiUser,
    PassbackStatus,
    ScorePassback,
    Submission,
    WebhookDelivery,
    WebhookEndpoint,
    utcnow,
)

KEPT = "id, status, attempts, last_error, delivered_at, dispatched_at, created_at"


def _rows(url: str, table: str) -> dict[int, tuple[Any, ...]]:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = {row[0]: tuple(row) for row in connection.execute(
            text(f"SELECT {KEPT} FROM {table} ORDER BY id"))}
    engine.dispose()
    return rows


def _column(url: str, table: str, column: str) -> dict[int, Any]:
    engine = create_engine(url)
    with engine.connect() as connection:
        values = dict(connection.execute(text(f"SELECT id, {column} FROM {table}")).all())
    engine.dispose()
    return {int(key): value for key, value in values.items()}


def _in_flight(factory: Factory) -> tuple[dict[str, int], dict[str, int]]:
    """A webhook delivery and a score passback in each state: pending (due), waiting for a
    retry, leased by a sender now, failed and delivered."""
    session = db.session()
    course = factory.course()
    assignment = factory.assignment(course)
    student = factory.user(course=course)
    submission = Submission(user_id=student.id, assignment_id=assignment.id,
                            assignment_version=assignment.version, seed=1)
    endpoint = WebhookEndpoint(course_id=course.id, url="https://hooks.example/in",
                               secret="whsec_x", events=["submission.graded"])
    platform = LtiPlatform(issuer="https://lms.example", client_id="tool",
                           auth_login_url="https://lms.example/auth",
                           access_token_url="https://lms.example/token",
                           jwks_url="https://lms.example/jwks")
    session.add_all([submission, endpoint, platform])
    session.flush()
    context = LtiContext(platform_id=platform.id, context_id="c1", course_id=course.id)
    lti_user = LtiUser(platform_id=platform.id, sub="s1", user_id=student.id)
    session.add_all([context, lti_user])
    session.flush()
    link = LtiResourceLink(platform_id=platform.id, context_id=context.id,
                           resource_link_id="l1", assignment_id=assignment.id,
                           lineitem_url="https://lms.example/items/1")
    session.add(link)
    session.flush()
    now = utcnow()
    states: dict[str, dict[str, Any]] = {
        "pending": {"next_attempt_at": now},
        "retrying": {"attempts": 2, "next_attempt_at": now + timedelta(minutes=5),
                     "last_error": "HTTP 500", "dispatched_at": now + timedelta(minutes=5)},
        "leased": {"attempts": 1, "next_attempt_at": now, "lease_token": "a" * 32,
                   "lease_expires_at": now + timedelta(minutes=2), "dispatched_at": now},
        "failed": {"attempts": 3, "next_attempt_at": now, "last_error": "timed out",
                   "status": "failed"},
        "delivered": {"attempts": 1, "next_attempt_at": now, "delivered_at": now,
                      "status": "delivered"},
    }
    hooks, scores = {}, {}
    for name, columns in states.items():
        status = columns.pop("status", "pending")
        hook = WebhookDelivery(endpoint_id=endpoint.id, submission_id=submission.id,
                               event="submission.graded", message_id=f"msg_{name}",
                               payload={"type": "submission.graded"},
                               status=DeliveryStatus(status), **columns)
        score = ScorePassback(submission_id=submission.id, lti_user_id=lti_user.id,
                              resource_link_id=link.id, lineitem_url=link.lineitem_url,
                              status=PassbackStatus(status), updated_at=now, **columns)
        session.add_all([hook, score])
        session.flush()
        hooks[name], scores[name] = hook.id, score.id
    session.commit()
    return hooks, scores


def _due_ids(model: Any) -> set[int]:
    return set(db.session().scalars(select(model.id).where(due(model, utcnow()))))


def test_deliveries_in_flight_survive_downgrade_and_upgrade(
        pg_app: Flask, pg_factory: Factory, pg_url: str) -> None:
    hooks, scores = _in_flight(pg_factory)
    assert _due_ids(WebhookDelivery) == {hooks["pending"]}
    assert _due_ids(ScorePassback) == {scores["pending"]}
    before = {table: _rows(pg_url, table)
              for table in ("webhook_deliveries", "lti_score_passbacks")}
    lease_ends = _column(pg_url, "webhook_deliveries", "lease_expires_at")
    db.session().close()
    pg_app.extensions["autograde.db"].engine.dispose()

    db.downgrade(pg_url, "0006")
    for table, rows in before.items():
        assert _rows(pg_url, table) == rows, table
    # The attempt in flight holds its webhook delivery the pre-0007 way: not due before then.
    waits = _column(pg_url, "webhook_deliveries", "next_attempt_at")
    assert waits[hooks["leased"]] == lease_ends[hooks["leased"]]
    assert waits[hooks["retrying"]] > utcnow()

    db.upgrade(pg_url)
    for table, rows in before.items():
        assert _rows(pg_url, table) == rows, table
    assert _column(pg_url, "lti_score_passbacks", "lease_token")[scores["leased"]] == "a" * 32
    # Due again only what was due before: the leased ones wait for their sender's lease.
    assert _due_ids(WebhookDelivery) == {hooks["pending"]}
    assert _due_ids(ScorePassback) == {scores["pending"]}
