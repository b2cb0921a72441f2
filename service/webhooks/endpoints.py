"""What instructors do with webhooks: register, change, rotate, remove, read the log, redeliver.

Shared by the API, the dashboard pages and the admin CLI; permission checks live here too, so
every surface refuses the same things with the same messages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.core.errors import NotFound, ServiceError
from service.courses.enrolment import course_by_code, course_role
from service.grading.events import Event
from service.models import (
    Course,
    CourseRole,
    DeliveryStatus,
    User,
    WebhookDelivery,
    WebhookEndpoint,
    utcnow,
)
from service.webhooks.delivery import ROTATION_GRACE, WebhookChannel, new_secret
from service.webhooks.egress import EgressPolicy, Resolver, resolve_target, system_resolver

EVENTS = [event.value for event in Event]
MAX_ENDPOINTS_PER_COURSE = 20


def taught_course(session: Session, user: User, code: str) -> Course:
    """The course, when ``user`` teaches it (404 for a course they cannot see)."""
    course = course_by_code(session, code)
    if course_role(session, user, course.id) is not CourseRole.INSTRUCTOR:
        raise NotFound(f"There is no course {code!r} that you teach.")
    return course


def endpoint_for(session: Session, user: User, endpoint_id: int) -> WebhookEndpoint:
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None or course_role(session, user, endpoint.course_id) \
            is not CourseRole.INSTRUCTOR:
        raise NotFound(f"There is no webhook {endpoint_id} in a course you teach.")
    return endpoint


def delivery_for(session: Session, user: User, delivery_id: int) -> WebhookDelivery:
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None or course_role(session, user, delivery.endpoint.course_id) \
            is not CourseRole.INSTRUCTOR:
        raise NotFound(f"There is no webhook delivery {delivery_id} in a course you teach.")
    return delivery


def parse_events(raw: Any) -> list[str]:
    """The subscribed events: a non-empty list of known event types (all when absent)."""
    if raw is None:
        return list(EVENTS)
    if not isinstance(raw, list) or not raw or not all(isinstance(e, str) for e in raw):
        raise ServiceError(f"`events` must be a non-empty list of: {', '.join(EVENTS)}.")
    unknown = sorted(set(raw) - set(EVENTS))
    if unknown:
        raise ServiceError(f"Unknown event(s) {', '.join(unknown)}; known: "
                           f"{', '.join(EVENTS)}.")
    return [e for e in EVENTS if e in raw]


def create_endpoint(session: Session, *, course: Course, url: Any, events: Any = None,
                    created_by: User | None, policy: EgressPolicy,
                    resolver: Resolver = system_resolver) -> WebhookEndpoint:
    """Register an endpoint; its new secret is on the returned row (show it once)."""
    subscribed = parse_events(events)
    resolve_target(url, policy, resolver)
    count = len(list(session.scalars(select(WebhookEndpoint.id).where(
        WebhookEndpoint.course_id == course.id))))
    if count >= MAX_ENDPOINTS_PER_COURSE:
        raise ServiceError(f"A course may have at most {MAX_ENDPOINTS_PER_COURSE} webhooks.")
    endpoint = WebhookEndpoint(course_id=course.id, url=url, secret=new_secret(),
                               events=subscribed, active=True,
                               created_by_id=created_by.id if created_by else None)
    session.add(endpoint)
    session.flush()
    return endpoint


def update_endpoint(endpoint: WebhookEndpoint, changes: dict[str, Any], policy: EgressPolicy,
                    resolver: Resolver = system_resolver) -> None:
    unknown = sorted(set(changes) - {"url", "events", "active"})
    if unknown:
        raise ServiceError(f"Unknown field(s): {', '.join(unknown)}; "
                           "you may change url, events and active.")
    active = changes.get("active", endpoint.active)
    if not isinstance(active, bool):
        raise ServiceError("`active` must be true or false.")
    events = parse_events(changes["events"]) if "events" in changes else endpoint.events
    if "url" in changes:
        resolve_target(changes["url"], policy, resolver)
    endpoint.active, endpoint.events = active, events
    endpoint.url = changes.get("url", endpoint.url)


def rotate_secret(endpoint: WebhookEndpoint) -> str:
    """A new secret; the old one still signs (as a second signature) for a grace period."""
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_until = utcnow() + ROTATION_GRACE
    endpoint.secret = new_secret()
    return endpoint.secret


def course_endpoints(session: Session, course: Course) -> list[WebhookEndpoint]:
    return list(session.scalars(select(WebhookEndpoint).where(
        WebhookEndpoint.course_id == course.id).order_by(WebhookEndpoint.id)))


def deliveries(session: Session, *, course: Course | None = None,
               endpoint: WebhookEndpoint | None = None, status: str | None = None,
               limit: int = 50, offset: int = 0) -> list[WebhookDelivery]:
    """The delivery log, newest first."""
    query = select(WebhookDelivery).order_by(WebhookDelivery.id.desc())
    if endpoint is not None:
        query = query.where(WebhookDelivery.endpoint_id == endpoint.id)
    if course is not None:
        query = query.join(WebhookEndpoint).where(WebhookEndpoint.course_id == course.id)
    if status is not None:
        try:
            query = query.where(WebhookDelivery.status == DeliveryStatus(status))
        except ValueError:
            raise ServiceError("`status` must be pending, delivered or failed.") from None
    return list(session.scalars(query.limit(limit).offset(offset)))


def redeliver(session: Session, delivery: WebhookDelivery, channel: WebhookChannel) -> None:
    """Send the event again (same ``webhook-id``) with a fresh set of attempts, now."""
    session.execute(update(WebhookDelivery).where(WebhookDelivery.id == delivery.id).values(
        status=DeliveryStatus.PENDING, attempts=0, next_attempt_at=utcnow(),
        lease_token=None, lease_expires_at=None, dispatched_at=None, delivered_at=None)
        .execution_options(synchronize_session=False))
    session.commit()
    channel.send_due(session, delivery_id=delivery.id)
    session.refresh(delivery)


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def endpoint_json(endpoint: WebhookEndpoint, *, secret: str | None = None) -> dict[str, Any]:
    """An endpoint as instructors read it; the secret only right after it was made."""
    body: dict[str, Any] = {
        "id": endpoint.id, "course": endpoint.course.code, "url": endpoint.url,
        "events": list(endpoint.events), "active": endpoint.active,
        "created_at": _when(endpoint.created_at),
        "created_by": endpoint.created_by.username if endpoint.created_by else None,
    }
    if secret is not None:
        body["secret"] = secret
    return body


def delivery_json(delivery: WebhookDelivery) -> dict[str, Any]:
    return {
        "id": delivery.id, "endpoint_id": delivery.endpoint_id,
        "submission_id": delivery.submission_id, "event": delivery.event,
        "webhook_id": delivery.message_id, "status": delivery.status.value,
        "attempts": delivery.attempts, "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error, "created_at": _when(delivery.created_at),
        "last_attempt_at": _when(delivery.last_attempt_at),
        "next_attempt_at": _when(delivery.next_attempt_at)
        if delivery.status is DeliveryStatus.PENDING else None,
        "delivered_at": _when(delivery.delivered_at), "payload": delivery.payload,
    }
