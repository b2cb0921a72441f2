"""Grade passback: every graded submission's score, by the assignment's policy, to the LMS line
item (LTI Assignment and Grade Services), over an OAuth2 client-credentials token.

Deliveries are rows recorded with the result (the outbox of ``service.events``). A task claims
one by compare-and-set, computes the score at send time, posts it, and retries with backoff.
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

from service import queue
from service.db import rows_changed
from service.events import Event, dispatch_due
from service.gradebook import counted_score
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
from service.visibility import released

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

    def backoff(self, attempts: int) -> int:
        return int(min(self.retry_cap_seconds, self.retry_base_seconds * 2 ** (attempts - 1)))


class GradePassback:
    """The LTI channel of ``service.events``: a delivery per line item the student was graded
    for, when the student launched from the LMS and the link has a line item."""

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
        due = and_(ScorePassback.status == PassbackStatus.PENDING,
                   ScorePassback.next_attempt_at <= now,
                   ScorePassback.lease_expires_at.is_(None)
                   | (ScorePassback.lease_expires_at < now))
        if submission_id is not None:
            due = and_(due, ScorePassback.submission_id == submission_id)
        if assignment_id is not None:
            due = and_(due, ScorePassback.resource_link_id.in_(
                select(LtiResourceLink.id).where(LtiResourceLink.assignment_id == assignment_id)))
        return dispatch_due(
            session, ScorePassback, due, now=now,
            redispatch_seconds=float(current_app.config["DELIVERY_REDISPATCH_SECONDS"]),
            send=lambda row_id: queue.send(queue.PUBLISH_TASK, row_id))


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
    decides them (``service.gradebook.counted_score``: policy, deadline and extensions, late
    penalty, adjustments) — the same score as their page, the CSV and the API."""
    counted = counted_score(session, user_id, assignment)
    if counted is None or counted.result_id is None or counted.final is None:
        return None
    result = session.get(Result, counted.result_id)
    return (result, counted.final) if result is not None else None


def withheld_until(result: Result, assignment: CourseAssignment, *, recheck_seconds: int
                   ) -> datetime | None:
    """When to look again, if the result has checks its student may not see yet: the LMS
    gradebook is theirs to read, so it gets the score only once every check is released."""
    now = utcnow()
    if all(released(check["visibility"], now=now, due_at=assignment.due_at,
                    results_published=assignment.results_published)
           for check in result.document.get("tests", [])):
        return None
    later = now + timedelta(seconds=recheck_seconds)
    due = assignment.due_at
    return due if due is not None and now < due < later else later


@dataclass(frozen=True)
class Outcome:
    status: str
    """``delivered``, ``retry``, ``failed``, ``held`` (checks not released to the student yet)
    or ``skipped`` (another copy has it, or it is done)."""
    retry_in: int | None = None


def publish(session: Session, delivery_id: int, *, settings: PassbackSettings,
            tokens: AccessTokens) -> Outcome:
    """One attempt at one delivery; only the copy holding the claim sends."""
    now = utcnow()
    lease = secrets.token_hex(16)
    claimed = rows_changed(session, update(ScorePassback).where(
        ScorePassback.id == delivery_id, ScorePassback.status == PassbackStatus.PENDING,
        # A little slack: the task's countdown and the row's time may disagree by a moment.
        ScorePassback.next_attempt_at <= now + timedelta(seconds=2),
        ScorePassback.lease_expires_at.is_(None) | (ScorePassback.lease_expires_at < now))
        .values(lease_token=lease, lease_expires_at=now + timedelta(seconds=LEASE_SECONDS),
                attempts=ScorePassback.attempts + 1, updated_at=now))
    session.commit()
    if claimed != 1:
        return Outcome("skipped")
    delivery = session.get(ScorePassback, delivery_id, populate_existing=True)
    assert delivery is not None
    platform = session.get(LtiPlatform, delivery.lti_user.platform_id)
    assert platform is not None
    assignment = delivery.submission.assignment
    chosen = chosen_result(session, delivery.lti_user.user_id, assignment)
    if chosen is None:
        _finish(session, delivery, lease, PassbackStatus.SUPERSEDED,
                error="the student has no graded submission any more")
        return Outcome("skipped")
    result, final = chosen
    held = withheld_until(result, assignment, recheck_seconds=settings.hold_recheck_seconds)
    if held is not None:
        # Not an attempt: nothing was sent. The periodic task sends it when it is due again.
        _finish(session, delivery, lease, PassbackStatus.PENDING, next_attempt_at=held,
                attempts=delivery.attempts - 1, error=HELD)
        return Outcome("held")
    score = (final, result.max_score)
    try:
        _send(session, platform, delivery, score, tokens, settings.timeout_seconds)
    except (DeliveryError, requests.RequestException, ValueError, KeyError) as exc:
        return _failed(session, delivery, lease, exc, settings)
    _finish(session, delivery, lease, PassbackStatus.DELIVERED, score=score)
    log.info("LTI score of passback %s delivered (%s/%s)", delivery_id, *score)
    return Outcome("delivered")


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


def _failed(session: Session, delivery: ScorePassback, lease: str, exc: Exception,
            settings: PassbackSettings) -> Outcome:
    reason = str(exc) if isinstance(exc, DeliveryError) else type(exc).__name__
    permanent = isinstance(exc, DeliveryError) and exc.status in PERMANENT
    if permanent or delivery.attempts >= settings.max_attempts:
        _finish(session, delivery, lease, PassbackStatus.FAILED, error=reason)
        log.warning("LTI passback %s failed for good after %s attempt(s): %s", delivery.id,
                    delivery.attempts, reason)
        return Outcome("failed")
    countdown = settings.backoff(delivery.attempts)
    due = utcnow() + timedelta(seconds=countdown)
    # A short wait is the task's own countdown (it holds the dispatch until then); a long one
    # is left to the periodic sweep.
    by_countdown = countdown <= settings.countdown_limit_seconds
    _finish(session, delivery, lease, PassbackStatus.PENDING, error=reason, next_attempt_at=due,
            dispatched_at=due if by_countdown else None)
    log.info("LTI passback %s: attempt %s failed (%s); again in %s s", delivery.id,
             delivery.attempts, reason, countdown)
    return Outcome("retry", countdown if by_countdown else None)


def _finish(session: Session, delivery: ScorePassback, lease: str, status: PassbackStatus, *,
            score: tuple[float, float] | None = None, error: str | None = None,
            next_attempt_at: datetime | None = None, attempts: int | None = None,
            dispatched_at: datetime | None = None) -> None:
    """Record an attempt's end; a delivery left pending is sent again by the periodic sweep when
    due, unless ``dispatched_at`` says a task is already scheduled for it."""
    now = utcnow()
    values: dict[str, Any] = {"status": status, "lease_token": None, "lease_expires_at": None,
                              "updated_at": now, "last_error": error,
                              "dispatched_at": dispatched_at}
    if score is not None:
        values.update(score_given=score[0], score_maximum=score[1], delivered_at=now)
    if next_attempt_at is not None:
        values["next_attempt_at"] = next_attempt_at
    if attempts is not None:
        values["attempts"] = attempts
    rows_changed(session, update(ScorePassback).where(ScorePassback.id == delivery.id,
                                                  ScorePassback.lease_token == lease)
             .values(**values))
    session.commit()


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
