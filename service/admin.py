"""Administration from the command line, straight on the database (config from AUTOGRADE_*)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service import accounts, courses, db
from service.config import load_config
from service.errors import NotFound
from service.models import (
    CourseAssignment,
    CourseRole,
    Role,
    User,
    WebhookDelivery,
    WebhookEndpoint,
)
from service.release import apply_settings
from service.webhooks.egress import EgressPolicy
from service.webhooks.endpoints import course_endpoints, create_endpoint


def database_url(overrides: dict[str, Any] | None = None) -> str:
    return str(load_config(overrides)["DATABASE_URL"])


@contextmanager
def app_session(app: Flask) -> Iterator[Session]:
    """A session in the app's context, committed on success."""
    with app.app_context():
        session = db.session()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


@dataclass(frozen=True)
class NewUser:
    username: str
    password: str
    generated: bool


def create_user(session: Session, *, username: str, role: str, password: str | None,
                display_name: str = "") -> NewUser:
    generated = password is None
    password = password or secrets.token_urlsafe(12)
    accounts.create_user(session, username=username, password=password, role=Role(role),
                         display_name=display_name)
    return NewUser(username, password, generated)


def enrol(session: Session, *, course: str, username: str, role: str) -> None:
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        raise NotFound(f"There is no user {username!r}.")
    courses.enrol(session, course=courses.course_by_code(session, course), user=user,
                  role=CourseRole(role))


def assignment(session: Session, course: str, slug: str) -> CourseAssignment:
    found = session.scalar(select(CourseAssignment).where(
        CourseAssignment.course_id == courses.course_by_code(session, course).id,
        CourseAssignment.slug == slug))
    if found is None:
        raise NotFound(f"Course {course} has no assignment {slug!r} (run "
                               "`autograde admin sync-assignments`).")
    return found


def set_assignment(session: Session, course: str, slug: str, changes: dict[str, Any]) -> None:
    # Through the one settings function, so scores that waited for a release leave now.
    apply_settings(session, assignment(session, course, slug), changes, by=None)


def add_webhook(session: Session, *, course: str, url: str,
                events: list[str] | None) -> WebhookEndpoint:
    """Register an endpoint as an administrator (the egress policy applies all the same)."""
    return create_endpoint(session, course=courses.course_by_code(session, course), url=url,
                           events=events, created_by=None,
                           policy=EgressPolicy.from_config(current_app.config))


def list_webhooks(session: Session, course: str) -> list[str]:
    """One line per endpoint: id, state, events, URL, deliveries by status."""
    lines = []
    for endpoint in course_endpoints(session, courses.course_by_code(session, course)):
        counts = dict(session.execute(select(WebhookDelivery.status, func.count()).where(
            WebhookDelivery.endpoint_id == endpoint.id).group_by(WebhookDelivery.status)).all())
        tally = ", ".join(f"{n} {status.value}" for status, n in counts.items()) or "none"
        lines.append(f"{endpoint.id:>4}  {'active' if endpoint.active else 'disabled':<8}  "
                     f"{','.join(endpoint.events)}  {endpoint.url}  (deliveries: {tally})")
    return lines


def remove_webhook(session: Session, endpoint_id: int) -> None:
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None:
        raise NotFound(f"There is no webhook {endpoint_id}.")
    session.delete(endpoint)
