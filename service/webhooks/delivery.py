"""The webhook channel: deliveries recorded with the result, sent signed, retried with backoff.

Deliveries are sent by the engine of ``service.grading.outbox`` (one sender at a time under a
lease, the outcome recorded only while the lease is still its own, so a delivered event is never
sent again unless an instructor asks for it); what is webhook-specific is here: the payload, the
Standard Webhooks signature and the egress checks of the receiver's address.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from sqlalchemy import and_, select
from sqlalchemy.orm import Session
from standardwebhooks import Webhook

from service.core import queue
from service.grading.events import Event
from service.grading.outbox import Outcome, RetryPolicy, Sent, attempt, dispatch_due, due
from service.lti.identity import lms_identity
from service.models import (
    Result,
    Submission,
    WebhookDelivery,
    WebhookEndpoint,
    utcnow,
)
from service.submissions.gradebook import score_of
from service.webhooks.egress import EgressPolicy, RefusedTarget, Target, resolve_target

log = logging.getLogger(__name__)

USER_AGENT = "autograde-webhooks/1"
SECRET_BYTES = 32
ROTATION_GRACE = timedelta(hours=24)
"""How long deliveries stay signed with the previous secret after a rotation as well."""

Dispatch = Callable[[int, float | None], None]
"""Send the task of a delivery id, now or after a countdown in seconds."""


@dataclass(frozen=True)
class WebhookPolicy:
    timeout_seconds: float
    max_attempts: int
    backoff_seconds: float
    backoff_max_seconds: float
    redispatch_seconds: float
    countdown_limit_seconds: float
    """Retries due later than this are left to the periodic sweep, not held by a worker as
    countdown tasks (Redis would redeliver a task held past its visibility timeout)."""
    egress: EgressPolicy

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> WebhookPolicy:
        return cls(timeout_seconds=float(config["WEBHOOK_TIMEOUT_SECONDS"]),
                   max_attempts=max(1, int(config["WEBHOOK_MAX_ATTEMPTS"])),
                   backoff_seconds=float(config["WEBHOOK_BACKOFF_SECONDS"]),
                   backoff_max_seconds=float(config["WEBHOOK_BACKOFF_MAX_SECONDS"]),
                   redispatch_seconds=float(config["DELIVERY_REDISPATCH_SECONDS"]),
                   countdown_limit_seconds=float(config["VISIBILITY_TIMEOUT"]) / 2,
                   egress=EgressPolicy.from_config(config))

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(self.backoff_seconds, self.backoff_max_seconds, self.max_attempts,
                           self.countdown_limit_seconds)

    def backoff(self, attempts: int) -> float:
        """Seconds to wait after failed attempt number ``attempts`` (1, 2, ...)."""
        return self.retry.backoff(attempts)

    @property
    def attempt_lease(self) -> timedelta:
        """How long an attempt in flight keeps its delivery from being sent again."""
        return timedelta(seconds=2 * self.timeout_seconds + 30)


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def signature_header(endpoint: WebhookEndpoint, message_id: str, timestamp: datetime,
                     body: str) -> str:
    """``webhook-signature``: signed with the current secret, and with the previous one during
    the grace period after a rotation (space-separated, as the scheme allows)."""
    secrets_in_force = [endpoint.secret]
    if (endpoint.previous_secret and endpoint.previous_secret_until
            and endpoint.previous_secret_until > utcnow()):
        secrets_in_force.append(endpoint.previous_secret)
    return " ".join(Webhook(secret).sign(message_id, timestamp, body)
                    for secret in secrets_in_force)


def signed_headers(endpoint: WebhookEndpoint, message_id: str, body: str,
                   timestamp: datetime | None = None) -> dict[str, str]:
    sent_at = timestamp or utcnow()
    return {"webhook-id": message_id,
            "webhook-timestamp": str(int(sent_at.timestamp())),
            "webhook-signature": signature_header(endpoint, message_id, sent_at, body),
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT}


def event_payload(session: Session, submission: Submission, event: Event) -> dict[str, Any]:
    """The body of an event: what a receiver needs to act on it without calling back."""
    result = session.scalar(select(Result).where(Result.submission_id == submission.id,
                                                 Result.round == submission.round))
    scored = result if event is Event.GRADED else None
    # Final score and lateness as the gradebook derives them (deadline, extension, penalty,
    # adjustment): what the student's page and the CSV say.
    now = score_of(session, submission)
    data = {
        "submission_id": submission.id,
        "student": {"id": submission.user.id, "username": submission.user.username,
                    "lms": lms_identity(session, submission)},
        "course": submission.assignment.course.code,
        "assignment": submission.assignment.slug,
        "round": submission.round,
        "status": "graded" if event is Event.GRADED else "failed",
        "score": scored.score if scored else None,
        "max_score": scored.max_score if scored else submission.assignment.max_score,
        "final_score": now.final if scored else None,
        "codes": list(scored.codes) if scored else [],
        "late": now.late,
        "message": submission.message if event is Event.FAILED else None,
    }
    stamp = utcnow().isoformat().replace("+00:00", "Z")
    return {"type": event.value, "timestamp": stamp, "data": data}


def body_of(delivery: WebhookDelivery) -> str:
    return json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False)


class _PinnedAdapter(HTTPAdapter):
    """Connects to the checked address while TLS verifies the certificate for the host name."""

    def __init__(self, hostname: str) -> None:
        self._hostname = hostname
        super().__init__(max_retries=0)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False,
                         **pool_kwargs: Any) -> None:
        pool_kwargs.update(server_hostname=self._hostname, assert_hostname=self._hostname)
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)


def post(target: Target, body: str, headers: dict[str, str],
         timeout: float) -> tuple[int | None, str | None]:
    """POST once, following no redirect: (status code, None) or (code or None, short error)."""
    with requests.Session() as http:
        http.trust_env = False  # no proxy from the environment: the checked address is the peer
        http.mount(f"{target.scheme}://", _PinnedAdapter(target.hostname))
        try:
            response = http.post(target.pinned_url, data=body.encode("utf-8"),
                                 headers={**headers, "Host": target.host_header},
                                 timeout=timeout, allow_redirects=False, stream=True)
        except requests.Timeout:
            return None, "timed out"
        except requests.exceptions.SSLError:
            return None, "TLS error (certificate or handshake)"
        except requests.RequestException as exc:
            return None, f"connection failed ({type(exc).__name__})"
        response.close()
    if 200 <= response.status_code < 300:
        return response.status_code, None
    if 300 <= response.status_code < 400:
        return response.status_code, f"HTTP {response.status_code} (redirects are not followed)"
    return response.status_code, f"HTTP {response.status_code}"


class WebhookCourier:
    """The webhooks' part of ``service.grading.outbox``: the endpoint's checks, the signed body."""

    model = WebhookDelivery
    label = "webhook delivery"
    retrying = "retrying"

    def __init__(self, policy: WebhookPolicy) -> None:
        self.policy, self.retry, self.lease = policy, policy.retry, policy.attempt_lease

    def stamp(self, now: datetime, *, claimed: bool) -> dict[str, Any]:
        return {"last_attempt_at": now} if claimed else {}

    def send(self, session: Session, delivery: WebhookDelivery) -> Sent:
        endpoint = session.get(WebhookEndpoint, delivery.endpoint_id, populate_existing=True)
        code, error = _post_event(delivery, endpoint, self.policy)
        return Sent(error, columns={"last_status_code": code})


def deliver(session: Session, delivery_id: int, policy: WebhookPolicy) -> Outcome:
    """One attempt at a delivery, if it is due and still pending; records what happened."""
    return attempt(session, WebhookCourier(policy), delivery_id)


def _post_event(delivery: WebhookDelivery, endpoint: WebhookEndpoint | None,
                policy: WebhookPolicy) -> tuple[int | None, str | None]:
    if endpoint is None or not endpoint.active:
        return None, "endpoint disabled"
    try:
        target = resolve_target(endpoint.url, policy.egress)
    except RefusedTarget as refused:
        return None, "refused: " + refused.detail[:150]
    body = body_of(delivery)
    return post(target, body, signed_headers(endpoint, delivery.message_id, body),
                policy.timeout_seconds)


TEST_EVENT = "webhook.test"


@dataclass(frozen=True)
class ReceiverAnswer:
    """What the receiver answered to a test event (sent once, now; not logged or retried)."""

    webhook_id: str
    status_code: int | None
    error: str | None

    @property
    def delivered(self) -> bool:
        return self.error is None


def send_test_event(endpoint: WebhookEndpoint, policy: WebhookPolicy) -> ReceiverAnswer:
    """Post a signed ``webhook.test`` event to the endpoint, as a real event would be sent
    (same checks, signing and timeout), so an instructor can check a receiver before any
    submission is graded."""
    message_id = new_message_id()
    stamp = utcnow().isoformat().replace("+00:00", "Z")
    body = json.dumps({"type": TEST_EVENT, "timestamp": stamp, "data": {
        "endpoint_id": endpoint.id, "course": endpoint.course.code,
        "events": list(endpoint.events),
        "message": "A test event from autograde: your receiver is reachable and can verify "
                   "our signature."}}, separators=(",", ":"))
    try:
        target = resolve_target(endpoint.url, policy.egress)
    except RefusedTarget as refused:
        return ReceiverAnswer(message_id, None, "refused: " + refused.detail[:150])
    code, error = post(target, body, signed_headers(endpoint, message_id, body),
                       policy.timeout_seconds)
    log.info("webhook %s: test event answered %s", endpoint.id, error or f"HTTP {code}")
    return ReceiverAnswer(message_id, code, error)


def celery_dispatch(delivery_id: int, countdown: float | None) -> None:
    queue.send(queue.DELIVER_TASK, WebhookChannel.name, delivery_id, countdown=countdown)


class WebhookChannel:
    """The ``Channel`` of webhooks (see ``service.grading.events``)."""

    name = "webhooks"

    def __init__(self, policy: WebhookPolicy, dispatch: Dispatch = celery_dispatch) -> None:
        self.policy = policy
        self.dispatch = dispatch

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> WebhookChannel:
        return cls(WebhookPolicy.from_config(config))

    def record(self, session: Session, submission: Submission, event: Event) -> None:
        # The caller changed the status and message with an UPDATE: read them back.
        session.refresh(submission, ["status", "message", "round"])
        endpoints = [e for e in session.scalars(select(WebhookEndpoint).where(
            WebhookEndpoint.course_id == submission.assignment.course_id,
            WebhookEndpoint.active.is_(True)).order_by(WebhookEndpoint.id))
            if event.value in e.events]
        if not endpoints:
            return
        payload = event_payload(session, submission, event)
        now = utcnow()
        for endpoint in endpoints:
            session.add(WebhookDelivery(endpoint_id=endpoint.id, submission_id=submission.id,
                                        event=event.value, message_id=new_message_id(),
                                        payload=payload, next_attempt_at=now))

    def send_due(self, session: Session, *, submission_id: int | None = None,
                 delivery_id: int | None = None) -> int:
        now = utcnow()
        condition = due(WebhookDelivery, now)
        if submission_id is not None:
            condition = and_(condition, WebhookDelivery.submission_id == submission_id)
        if delivery_id is not None:
            condition = and_(condition, WebhookDelivery.id == delivery_id)
        return dispatch_due(session, WebhookDelivery, condition, now=now,
                            redispatch_seconds=self.policy.redispatch_seconds,
                            send=lambda row_id: self.dispatch(row_id, None))


def new_message_id() -> str:
    return "msg_" + secrets.token_urlsafe(24)
