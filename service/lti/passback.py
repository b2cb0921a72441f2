"""Grade passback: every graded submission's score, by the assignment's policy, to the LMS line
item (LTI Assignment and Grade Services), over an OAuth2 client-credentials token.

Deliveries are rows recorded with the result (the outbox of ``service.grading.events``), sent by the
engine of ``service.grading.outbox``; what is LMS-specific is here: the score, computed at send time
(and withheld while the student may not see every check), and the platform's token.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from threading import Lock
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from flask import current_app
from sqlalchemy import and_, select, update
from sqlalchemy.orm import Session

from service.core import queue
from service.core.errors import NotFound
from service.grading.events import Event
from service.grading.outbox import Outcome, RetryPolicy, Sent, Settled, attempt, dispatch_due, due
from service.lti.keys import sign
from service.lti.provision import SCORE_SCOPE
from service.models import (
    CourseAssignment,
    LtiPlatform,
    LtiResourceLink,
    LtiUser,
    PassbackStatus,
    Result,
    ScorePassback,
    Submission,
    utcnow,
)
from service.submissions.gradebook import counted_score, deadline_of
from service.submissions.visibility import released

log = logging.getLogger(__name__)

SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
LEASE_SECONDS = 120
# Statuses after which trying again cannot help: the request itself is wrong for the platform.
PERMANENT = {400, 403, 404, 405, 410, 415, 422}


@dataclass(frozen=True)
class PassbackSettings:
    retry_base_seconds: int
    retry_cap_seconds: int
    max_attempts: int
    timeout_seconds: int
    hold_recheck_seconds: int
    countdown_limit_seconds: int
    """Retries due later than this are left to the periodic sweep, not held by a worker as
    countdown tasks (Redis would redeliver a task held past its visibility timeout)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PassbackSettings:
        return cls(int(config["LTI_RETRY_BASE_SECONDS"]), int(config["LTI_RETRY_CAP_SECONDS"]),
                   int(config["LTI_MAX_ATTEMPTS"]), int(config["LTI_HTTP_TIMEOUT_SECONDS"]),
                   int(config["LTI_HOLD_RECHECK_SECONDS"]),
                   int(config["VISIBILITY_TIMEOUT"]) // 2)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(self.retry_base_seconds, self.retry_cap_seconds, self.max_attempts,
                           self.countdown_limit_seconds)


class GradePassback:
    """The LTI channel of ``service.grading.events``: a delivery per line item the student was
    graded for, when the student launched from the LMS and the link has a line item."""

    name = "lti"

    def record(self, session: Session, submission: Submission, event: Event) -> None:
        if event is not Event.GRADED:
            return
        targets = session.execute(
            select(LtiUser, LtiResourceLink)
            .join(LtiResourceLink, LtiResourceLink.platform_id == LtiUser.platform_id)
            .where(LtiUser.user_id == submission.user_id,
                   LtiResourceLink.assignment_id == submission.assignment_id,
                   LtiResourceLink.lineitem_url.is_not(None))).all()
        now = utcnow()
        for lti_user, link in targets:
            assert link.lineitem_url is not None
            # The newer delivery sends the score as it is then: an older one still waiting
            # has nothing left to say.
            session.execute(update(ScorePassback).where(
                ScorePassback.lti_user_id == lti_user.id,
                ScorePassback.lineitem_url == link.lineitem_url,
                ScorePassback.status == PassbackStatus.PENDING,
                ScorePassback.lease_token.is_(None))
                .values(status=PassbackStatus.SUPERSEDED, updated_at=now)
                .execution_options(synchronize_session=False))
            session.add(ScorePassback(submission_id=submission.id, lti_user_id=lti_user.id,
                                      resource_link_id=link.id, lineitem_url=link.lineitem_url,
                                      next_attempt_at=now, updated_at=now))

    def send_due(self, session: Session, *, submission_id: int | None = None,
                 assignment_id: int | None = None) -> int:
        now = utcnow()
        condition = due(ScorePassback, now)
        if submission_id is not None:
            condition = and_(condition, ScorePassback.submission_id == submission_id)
        if assignment_id is not None:
            condition = and_(condition, ScorePassback.resource_link_id.in_(
                select(LtiResourceLink.id).where(LtiResourceLink.assignment_id == assignment_id)))
        return dispatch_due(
            session, ScorePassback, condition, now=now,
            redispatch_seconds=float(current_app.config["DELIVERY_REDISPATCH_SECONDS"]),
            send=lambda row_id: queue.send(queue.DELIVER_TASK, self.name, row_id))


class AccessTokens:
    """Client-credentials tokens of each platform, kept until shortly before they expire."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[int, str], tuple[str, float]] = {}
        self._lock = Lock()

    def get(self, session: Session, platform: LtiPlatform, scope: str, *,
            timeout: int) -> str:
        key = (platform.id, scope)
        with self._lock:
            cached = self._tokens.get(key)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        now = int(time.time())
        assertion = sign(session, {
            "iss": platform.client_id, "sub": platform.client_id,
            "aud": platform.token_audience or platform.access_token_url,
            "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(16)})
        response = requests.post(platform.access_token_url, timeout=timeout, data={
            "grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": assertion, "scope": scope})
        if response.status_code != 200:
            raise DeliveryError(f"the platform's token endpoint answered HTTP "
                                f"{response.status_code}", response.status_code)
        body = response.json()
        token = str(body["access_token"])
        lifetime = max(0, int(body.get("expires_in", 3600)) - 60)
        with self._lock:
            self._tokens[key] = (token, time.monotonic() + lifetime)
        return token

    def forget(self, platform: LtiPlatform, scope: str) -> None:
        with self._lock:
            self._tokens.pop((platform.id, scope), None)


class DeliveryError(Exception):
    """A failed attempt, said without secrets (no token, no response body)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def scores_url(lineitem_url: str) -> str:
    """``{lineitem}/scores``, keeping the line item URL's query (Moodle puts the id there)."""
    parts = urlsplit(lineitem_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def chosen_result(session: Session, user_id: int, assignment: CourseAssignment
                  ) -> tuple[Result, float] | None:
    """The result of the student's counted submission and its final score, as the gradebook
    decides them (``service.submissions.gradebook.counted_score``: policy, deadline and
    extensions, late penalty, adjustments) — the same score as their page, the CSV and the API."""
    counted = counted_score(session, user_id, assignment)
    if counted is None or counted.result_id is None or counted.final is None:
        return None
    result = session.get(Result, counted.result_id)
    return (result, counted.final) if result is not None else None


def withheld_until(result: Result, assignment: CourseAssignment, *, due_at: datetime | None,
                   recheck_seconds: int) -> datetime | None:
    """When to look again, if the result has checks its student may not see yet: the LMS
    gradebook is theirs to read, so it gets the score only once every check is released to
    them. ``due_at``: the student's own deadline (an extension moves it), as on their page."""
    now = utcnow()
    if all(released(check["visibility"], now=now, due_at=due_at,
                    results_published=assignment.results_published)
           for check in result.document.get("tests", [])):
        return None
    later = now + timedelta(seconds=recheck_seconds)
    return due_at if due_at is not None and now < due_at < later else later


class ScoreCourier:
    """The LMS's part of ``service.grading.outbox``: a token, and the score the gradebook counts."""

    model = ScorePassback
    label = "LTI passback"
    retrying = "retry"
    lease = timedelta(seconds=LEASE_SECONDS)

    def __init__(self, settings: PassbackSettings, tokens: AccessTokens) -> None:
        self.settings, self.tokens = settings, tokens
        self.retry = settings.retry

    def stamp(self, now: datetime, *, claimed: bool) -> dict[str, Any]:
        return {"updated_at": now}

    def send(self, session: Session, delivery: ScorePassback) -> Sent | Settled:
        platform = session.get(LtiPlatform, delivery.lti_user.platform_id)
        assert platform is not None
        assignment = delivery.submission.assignment
        chosen = chosen_result(session, delivery.lti_user.user_id, assignment)
        if chosen is None:
            return Settled("skipped", {"status": PassbackStatus.SUPERSEDED, "dispatched_at": None,
                                       "last_error": "the student has no graded submission "
                                                     "any more"})
        result, final = chosen
        held = withheld_until(
            result, assignment,
            due_at=deadline_of(session, assignment, delivery.lti_user.user_id).at,
            recheck_seconds=self.settings.hold_recheck_seconds)
        if held is not None:
            # Not an attempt: nothing was sent. The periodic task sends it when it is due again.
            return Settled("held", {"next_attempt_at": held, "attempts": delivery.attempts - 1,
                                    "last_error": HELD, "dispatched_at": None})
        try:
            _send(session, platform, delivery, (final, result.max_score), self.tokens,
                  self.settings.timeout_seconds)
        except (DeliveryError, requests.RequestException, ValueError, KeyError) as exc:
            return Sent(str(exc) if isinstance(exc, DeliveryError) else type(exc).__name__,
                        permanent=isinstance(exc, DeliveryError) and exc.status in PERMANENT)
        return Sent(columns={"score_given": final, "score_maximum": result.max_score})


def publish(session: Session, delivery_id: int, *, settings: PassbackSettings,
            tokens: AccessTokens) -> Outcome:
    """One attempt at one delivery; only the copy holding the claim sends."""
    return attempt(session, ScoreCourier(settings, tokens), delivery_id)


def _send(session: Session, platform: LtiPlatform, delivery: ScorePassback,
          score: tuple[float, float], tokens: AccessTokens, timeout: int) -> None:
    token = tokens.get(session, platform, SCORE_SCOPE, timeout=timeout)
    body = {"userId": delivery.lti_user.sub, "scoreGiven": score[0], "scoreMaximum": score[1],
            "activityProgress": "Completed", "gradingProgress": "FullyGraded",
            "timestamp": utcnow().isoformat(timespec="milliseconds")}
    response = requests.post(scores_url(delivery.lineitem_url), json=body, timeout=timeout,
                             headers={"Authorization": f"Bearer {token}",
                                      "Content-Type": SCORE_MEDIA_TYPE})
    if response.status_code == 401:
        tokens.forget(platform, SCORE_SCOPE)
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"the platform's score service answered HTTP "
                            f"{response.status_code}", response.status_code)


HELD = "held: some checks are not released to the student yet"


def send_held_now(session: Session, assignment: CourseAssignment) -> int:
    """Scores of the assignment waiting for a release, due now and their tasks sent at once (a
    release, or a due date moved into the past): how many. Each is judged again when sent, so
    a score still withheld simply waits again."""
    now = utcnow()
    session.execute(update(ScorePassback).where(
        ScorePassback.status == PassbackStatus.PENDING, ScorePassback.lease_token.is_(None),
        ScorePassback.last_error == HELD,
        ScorePassback.resource_link_id.in_(select(LtiResourceLink.id).where(
            LtiResourceLink.assignment_id == assignment.id)))
        .values(next_attempt_at=now, dispatched_at=None, updated_at=now)
        .execution_options(synchronize_session=False))
    session.commit()
    return GradePassback().send_due(session, assignment_id=assignment.id)


def held_count(session: Session, assignment: CourseAssignment) -> int:
    """Scores of the assignment waiting for its results to be released."""
    return len(session.scalars(select(ScorePassback.id).join(LtiResourceLink).where(
        LtiResourceLink.assignment_id == assignment.id,
        ScorePassback.status == PassbackStatus.PENDING,
        ScorePassback.last_error == HELD)).all())


def send_again(session: Session, delivery: ScorePassback) -> None:
    """An instructor's "send again": a fresh round of attempts, from now."""
    if delivery.status is PassbackStatus.PENDING and delivery.lease_token is not None:
        return
    delivery.status, delivery.attempts = PassbackStatus.PENDING, 0
    delivery.next_attempt_at = delivery.updated_at = utcnow()
    delivery.last_error, delivery.lease_expires_at = None, None
    delivery.dispatched_at = None
    session.flush()


def resend_passback(session: Session, target: CourseAssignment,
                    delivery_id: int) -> ScorePassback:
    """An instructor's "send again" of one passback of ``target``, committed and its task sent."""
    delivery = session.get(ScorePassback, delivery_id)
    if delivery is None or delivery.resource_link.assignment_id != target.id:
        raise NotFound(f"Assignment {target.slug} has no passback {delivery_id}.")
    send_again(session, delivery)
    session.commit()
    GradePassback().send_due(session, submission_id=delivery.submission_id)
    return delivery


def passbacks_of(session: Session, assignment: CourseAssignment,
                 limit: int = 500) -> list[ScorePassback]:
    return list(session.scalars(
        select(ScorePassback).join(LtiResourceLink)
        .where(LtiResourceLink.assignment_id == assignment.id)
        .order_by(ScorePassback.id.desc()).limit(limit)))


def passback_json(delivery: ScorePassback) -> dict[str, Any]:
    def moment(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {"id": delivery.id, "submission_id": delivery.submission_id,
            "username": delivery.lti_user.user.username, "lineitem": delivery.lineitem_url,
            "status": delivery.status.value, "attempts": delivery.attempts,
            "score_given": delivery.score_given, "score_maximum": delivery.score_maximum,
            "last_error": delivery.last_error, "created_at": moment(delivery.created_at),
            "next_attempt_at": moment(delivery.next_attempt_at),
            "delivered_at": moment(delivery.delivered_at)}
