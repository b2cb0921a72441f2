"""Submitting and reading submissions: the path from an upload to a queued grading job."""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.courses import course_role
from service.errors import Forbidden, NotFound, RateLimited
from service.models import (
    CourseAssignment,
    CourseRole,
    LatePolicy,
    Submission,
    SubmissionFile,
    SubmissionStatus,
    User,
    utcnow,
)
from service.visibility import student_view


@dataclass(frozen=True)
class RateLimit:
    count: int
    window_seconds: int


def rate_limit_for(assignment: CourseAssignment, defaults: Mapping[str, Any]) -> RateLimit:
    return RateLimit(assignment.rate_limit_count or defaults["RATE_LIMIT_COUNT"],
                     assignment.rate_limit_window_seconds or defaults["RATE_LIMIT_WINDOW_SECONDS"])


def submit(session: Session, *, user: User, assignment: CourseAssignment,
           files: Mapping[str, bytes], limit: RateLimit) -> Submission:
    """Record a submission as ``queued`` (the caller commits, then enqueues)."""
    now = utcnow()
    late = assignment.due_at is not None and now > assignment.due_at
    if late and assignment.late_policy is LatePolicy.REJECT:
        raise Forbidden(f"The due date ({assignment.due_at:%Y-%m-%d %H:%M} UTC) has passed and "
                        "this assignment does not accept late submissions.")
    if course_role(session, user, assignment.course_id) is not CourseRole.INSTRUCTOR:
        _check_rate(session, user, assignment, limit, now)
    submission = Submission(user=user, assignment=assignment,
                            assignment_version=assignment.version, seed=secrets.randbits(31),
                            late=late, requested_at=now, enqueued_at=now)
    submission.files = [SubmissionFile(name=name, sha256=hashlib.sha256(data).hexdigest(),
                                       size=len(data), content=data)
                        for name, data in sorted(files.items())]
    session.add(submission)
    session.flush()
    return submission


def _check_rate(session: Session, user: User, assignment: CourseAssignment, limit: RateLimit,
                now: datetime) -> None:
    since = now - timedelta(seconds=limit.window_seconds)
    recent = list(session.scalars(
        select(Submission.requested_at).where(
            Submission.user_id == user.id, Submission.assignment_id == assignment.id,
            Submission.requested_at > since,
            # What we failed to grade is not the student's to pay for.
            Submission.status != SubmissionStatus.FAILED).order_by(Submission.requested_at)))
    if len(recent) >= limit.count:
        retry = recent[len(recent) - limit.count] + timedelta(seconds=limit.window_seconds) - now
        seconds = max(1, math.ceil(retry.total_seconds()))
        raise RateLimited(
            f"You have made {len(recent)} submissions to {assignment.slug} in the last "
            f"{_duration(limit.window_seconds)}; the limit is {limit.count}. You can submit "
            f"again in {_duration(seconds)}. Test locally with the public tests meanwhile.",
            retry_after=seconds)


def _duration(seconds: int) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds >= 60:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds} s"


def readable_submission(session: Session, user: User, submission_id: int) -> Submission:
    """The submission if this user may read it; 404 otherwise (its existence is not revealed)."""
    submission = session.get(Submission, submission_id)
    if submission is None or not (
            submission.user_id == user.id
            or course_role(session, user, submission.assignment.course_id)
            is CourseRole.INSTRUCTOR):
        raise NotFound(f"There is no submission {submission_id} that you can read.")
    return submission


def my_submissions(session: Session, user: User, assignment: CourseAssignment | None,
                   limit: int, offset: int) -> list[Submission]:
    query = select(Submission).where(Submission.user_id == user.id)
    if assignment is not None:
        query = query.where(Submission.assignment_id == assignment.id)
    query = query.order_by(Submission.id.desc()).limit(limit).offset(offset)
    return list(session.scalars(query))


def submission_json(session: Session, submission: Submission, viewer: User) -> dict[str, Any]:
    """The submission resource; students get the filtered results document."""
    assignment = submission.assignment
    result = submission.result
    instructor = course_role(session, viewer, assignment.course_id) is CourseRole.INSTRUCTOR
    body: dict[str, Any] = {
        "id": submission.id,
        "assignment": assignment.slug,
        "course": assignment.course.code,
        "assignment_version": submission.assignment_version,
        "user": submission.user.username,
        "status": submission.status.value,
        "attempts": submission.attempts,
        "interruptions": submission.interruptions,
        "waiting_for_sandbox": submission.status is SubmissionStatus.QUEUED
        and submission.message is not None,
        "late": submission.late,
        "message": submission.message,
        "files": [{"name": f.name, "sha256": f.sha256, "size": f.size} for f in submission.files],
        "requested_at": _iso(submission.requested_at),
        "started_at": _iso(submission.started_at),
        "graded_at": _iso(submission.graded_at),
        "score": None,
        "max_score": None,
        "results": None,
    }
    if result is not None:
        if instructor:
            body.update(score=result.final_score, max_score=result.max_score,
                        results=result.document, codes=result.codes)
        else:
            view = student_view(result.document, now=utcnow(), due_at=assignment.due_at,
                                results_published=assignment.results_published)
            penalty = result.final_score - result.score
            body.update(score=round(view["score"] + penalty, 4)
                        if view["withheld_checks"] == 0 else None,
                        max_score=view["max_score"], results=view)
    return body


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def count_by_status(session: Session, assignment: CourseAssignment) -> dict[str, int]:
    rows = session.execute(select(Submission.status, func.count()).where(
        Submission.assignment_id == assignment.id).group_by(Submission.status))
    return {status.value: count for status, count in rows}


def requeue_for_regrade(submission: Submission) -> bool:
    """Start a new grading round; False when the submission is already waiting or running."""
    if submission.status in (SubmissionStatus.QUEUED, SubmissionStatus.RUNNING):
        return False
    submission.round += 1
    submission.attempts = submission.interruptions = submission.workers_lost = 0
    submission.status = SubmissionStatus.QUEUED
    submission.attempt_token = None
    submission.claimed_by = None
    submission.lease_expires_at = None
    submission.message = None
    submission.started_at = submission.graded_at = None
    submission.enqueued_at = utcnow()
    return True
