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
from sqlalchemy.orm import Session, selectinload

from assignments.spec import load_spec
from service.core.errors import Forbidden, NotFound, RateLimited
from service.courses.enrolment import course_role
from service.models import (
    CourseAssignment,
    CourseRole,
    LatePolicy,
    Submission,
    SubmissionComment,
    SubmissionFile,
    SubmissionStatus,
    User,
    utcnow,
)
from service.submissions.gradebook import Deadline, Scored, deadline_of, score_of, scores_by_id
from service.submissions.lateness import late_days
from service.submissions.uploads import check_case_twins
from service.submissions.visibility import student_view


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
    role = course_role(session, user, assignment.course_id)
    if role is CourseRole.OBSERVER:
        raise Forbidden("Observers (mentors in the LMS) see the course's assignments but do not "
                        "submit.")
    deadline = deadline_of(session, assignment, user.id).at
    late = late_days(now, deadline) > 0
    if late and assignment.late_policy is LatePolicy.REJECT:
        raise Forbidden(f"Your deadline ({deadline:%Y-%m-%d %H:%M} UTC) has passed and "
                        "this assignment does not accept late submissions.")
    check_case_twins(files, required=[load_spec(assignment.slug).entry])
    if role is not CourseRole.INSTRUCTOR:
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


@dataclass(frozen=True)
class RateStatus:
    """Where a student stands against the submission limit, shown before they reach it."""

    used: int
    limit: RateLimit
    next_at: datetime | None
    """When the oldest submission in the window leaves it (one more becomes possible)."""

    @property
    def remaining(self) -> int:
        return max(0, self.limit.count - self.used)

    def describe(self) -> str:
        """E.g. "3 of 10 submissions in the last 1 h; next slot frees at 14:05 UTC"."""
        text = (f"{self.used} of {self.limit.count} submissions in the last "
                f"{_duration(self.limit.window_seconds)}")
        if self.next_at is not None:
            text += f"; {'next' if self.remaining == 0 else 'a slot frees'} at " \
                    f"{self.next_at:%H:%M} UTC"
        return text

    def json(self) -> dict[str, Any]:
        return {"used": self.used, "limit": self.limit.count,
                "window_seconds": self.limit.window_seconds, "remaining": self.remaining,
                "next_at": _iso(self.next_at), "text": self.describe()}


def rate_status(session: Session, user: User, assignment: CourseAssignment, limit: RateLimit,
                now: datetime | None = None) -> RateStatus:
    now = now or utcnow()
    since = now - timedelta(seconds=limit.window_seconds)
    recent = list(session.scalars(
        select(Submission.requested_at).where(
            Submission.user_id == user.id, Submission.assignment_id == assignment.id,
            Submission.requested_at > since,
            # What we failed to grade is not the student's to pay for.
            Submission.status != SubmissionStatus.FAILED).order_by(Submission.requested_at)))
    if not recent:
        return RateStatus(0, limit, None)
    frees = recent[max(0, len(recent) - limit.count)]
    return RateStatus(len(recent), limit, frees + timedelta(seconds=limit.window_seconds))


def _check_rate(session: Session, user: User, assignment: CourseAssignment, limit: RateLimit,
                now: datetime) -> None:
    status = rate_status(session, user, assignment, limit, now)
    if status.remaining == 0 and status.next_at is not None:
        seconds = max(1, math.ceil((status.next_at - now).total_seconds()))
        raise RateLimited(
            f"Submission limit reached: you have made {status.used} submissions to "
            f"{assignment.slug} in the last {_duration(limit.window_seconds)} and the limit is "
            f"{limit.count}. You can submit again at {status.next_at:%H:%M} UTC (in "
            f"{_duration(seconds)}). Test locally with the public tests meanwhile.",
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
    query = query.order_by(Submission.id.desc()).limit(limit).offset(offset).options(
        selectinload(Submission.results), selectinload(Submission.files))
    return list(session.scalars(query))


def count_mine(session: Session, user: User, assignment: CourseAssignment | None) -> int:
    query = select(func.count()).select_from(Submission).where(Submission.user_id == user.id)
    if assignment is not None:
        query = query.where(Submission.assignment_id == assignment.id)
    return int(session.scalar(query) or 0)


def submission_json(session: Session, submission: Submission, viewer: User, *,
                    scored: Scored | None = None, deadline: Deadline | None = None,
                    comments: list[SubmissionComment] | None = None,
                    instructor: bool | None = None) -> dict[str, Any]:
    """The submission resource; students get the filtered results document. The keyword
    arguments are given when many are serialised at once (see ``submissions_json``)."""
    assignment = submission.assignment
    result = submission.result
    if instructor is None:
        instructor = course_role(session, viewer, assignment.course_id) is CourseRole.INSTRUCTOR
    scored = scored or score_of(session, submission)
    deadline = deadline or deadline_of(session, assignment, submission.user_id)
    if comments is None:
        comments = _comments(session, [submission.id]).get(submission.id, [])
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
        "round": submission.round,
        "late": scored.late,
        "late_days": scored.late_days,
        "deadline": _iso(deadline.at),
        "extension": deadline.describe() or None,
        "message": submission.message,
        "files": [{"name": f.name, "sha256": f.sha256, "size": f.size} for f in submission.files],
        "requested_at": _iso(submission.requested_at),
        "started_at": _iso(submission.started_at),
        "graded_at": _iso(submission.graded_at),
        "score": None,
        "raw_score": None,
        "adjusted": scored.adjusted is not None,
        "max_score": None,
        "results": None,
        "comments": [{"body": c.body, "at": c.created_at.isoformat(),
                      "author": (c.author.display_name or c.author.username) if c.author
                      else None} for c in comments],
    }
    if result is not None:
        if instructor:
            body.update(score=scored.final, raw_score=scored.raw, max_score=result.max_score,
                        results=result.document, codes=result.codes)
        else:
            view = student_view(result.document, now=utcnow(), due_at=deadline.at,
                                results_published=assignment.results_published)
            released = view["withheld_checks"] == 0
            body.update(score=scored.final if released else None,
                        raw_score=scored.raw if released else None,
                        max_score=view["max_score"], results=view)
    return body


def _comments(session: Session, ids: list[int]) -> dict[int, list[SubmissionComment]]:
    found: dict[int, list[SubmissionComment]] = {}
    for comment in session.scalars(select(SubmissionComment).where(
            SubmissionComment.submission_id.in_(ids)).order_by(SubmissionComment.id)):
        found.setdefault(comment.submission_id, []).append(comment)
    return found


def submissions_json(session: Session, submissions: list[Submission], viewer: User
                     ) -> list[dict[str, Any]]:
    """Many submission resources, in a few queries rather than a few per submission."""
    scores = scores_by_id(session, submissions)
    comments = _comments(session, [s.id for s in submissions])
    roles: dict[int, bool] = {}
    known: dict[tuple[int, int], Deadline] = {}
    bodies = []
    for s in submissions:
        course_id = s.assignment.course_id
        if course_id not in roles:
            roles[course_id] = course_role(session, viewer, course_id) is CourseRole.INSTRUCTOR
        key = (s.assignment_id, s.user_id)
        if key not in known:
            known[key] = deadline_of(session, s.assignment, s.user_id)
        bodies.append(submission_json(session, s, viewer, scored=scores[s.id],
                                      deadline=known[key], comments=comments.get(s.id, []),
                                      instructor=roles[course_id]))
    return bodies


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def count_by_status(session: Session, assignment: CourseAssignment) -> dict[str, int]:
    rows = session.execute(select(Submission.status, func.count()).where(
        Submission.assignment_id == assignment.id).group_by(Submission.status))
    return {status.value: count for status, count in rows}


def requeue_for_regrade(submission: Submission) -> bool:
    """Start a new grading round, with the assignment's version in force (a known mistake
    named since the last round names it now); False when the submission is already waiting
    or running."""
    if submission.status in (SubmissionStatus.QUEUED, SubmissionStatus.RUNNING):
        return False
    submission.assignment_version = submission.assignment.version
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
