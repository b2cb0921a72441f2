"""What instructors write into the books: extensions, score adjustments, comments to students.

One validation per action, shared by the API and the dashboard pages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, selectinload

from service.core.errors import NotFound, ServiceError
from service.models import (
    Course,
    CourseAssignment,
    CourseRole,
    Enrolment,
    Extension,
    ScoreAdjustment,
    Submission,
    SubmissionComment,
    User,
)
from service.submissions.gradebook import score_of
from service.submissions.lateness import plausible_moment

MAX_TEXT = 4000
MAX_EXTRA_DAYS = 365
MAX_STUDENTS_AT_ONCE = 2000


@dataclass(frozen=True)
class ExtensionRequest:
    usernames: list[str]
    due_at: datetime | None
    extra_days: int | None
    reason: str


def parse_extension(raw: dict[str, Any], *, assignment: CourseAssignment | None
                    ) -> ExtensionRequest:
    """``students`` (a list, or names separated by commas, spaces or lines) and either
    ``due_at`` (a new deadline for ``assignment``; ISO, in ``time_zone`` when it has no offset)
    or ``extra_days`` (standing, on every assignment of the course); ``reason`` optional."""
    students = raw.get("students")
    if isinstance(students, str):
        students = [name for name in re.split(r"[\s,;]+", students) if name]
    if not isinstance(students, list) or not students \
            or not all(isinstance(s, str) and s for s in students):
        raise ServiceError("`students` must list at least one user name.")
    if len(students) > MAX_STUDENTS_AT_ONCE:
        raise ServiceError(f"At most {MAX_STUDENTS_AT_ONCE} students at once.")
    reason = _text(raw.get("reason", ""), "reason", required=False)
    due, days = raw.get("due_at") or None, raw.get("extra_days")
    days = None if days in (None, "") else days
    if (due is None) == (days is None):
        raise ServiceError("Give either `due_at` (a new deadline for this assignment) or "
                           "`extra_days` (standing extra days on every assignment).")
    if due is not None:
        if assignment is None:
            raise ServiceError("A new deadline is for one assignment; for the whole course "
                               "give `extra_days`.")
        return ExtensionRequest(list(dict.fromkeys(students)),
                                _deadline(due, raw.get("time_zone") or assignment.time_zone),
                                None, reason)
    extra: int | None = None
    try:
        if not isinstance(days, bool) and float(str(days)).is_integer():
            extra = int(float(str(days)))
    except ValueError:
        extra = None
    if extra is None or not 1 <= extra <= MAX_EXTRA_DAYS:
        raise ServiceError(f"`extra_days` must be a whole number from 1 to {MAX_EXTRA_DAYS}.")
    return ExtensionRequest(list(dict.fromkeys(students)), None, extra, reason)


def _deadline(value: Any, zone: str) -> datetime:
    try:
        return plausible_moment(value, zone)
    except (ValueError, KeyError) as exc:
        raise ServiceError(f"`due_at` must be an ISO date and time, e.g. 2026-12-04T23:59 "
                           f"({exc}).") from None


def grant_extensions(session: Session, *, course: Course, assignment: CourseAssignment | None,
                     request: ExtensionRequest, by: User | None) -> list[Extension]:
    """Give each student the extension, replacing one of the same kind they had."""
    students = _students(session, course, request.usernames)
    granted = []
    for user in students:
        session.execute(delete(Extension).where(
            Extension.course_id == course.id, Extension.user_id == user.id,
            Extension.assignment_id == assignment.id if assignment is not None
            else Extension.assignment_id.is_(None)))
        extension = Extension(course_id=course.id, user_id=user.id,
                              assignment_id=assignment.id if assignment else None,
                              due_at=request.due_at, extra_days=request.extra_days,
                              reason=request.reason, granted_by_id=by.id if by else None)
        session.add(extension)
        granted.append(extension)
    session.flush()
    return granted


def _students(session: Session, course: Course, usernames: Iterable[str]) -> list[User]:
    wanted = list(usernames)
    found = {u.username: u for u in session.scalars(
        select(User).join(Enrolment, Enrolment.user_id == User.id).where(
            Enrolment.course_id == course.id, Enrolment.role == CourseRole.STUDENT,
            User.username.in_(wanted)))}
    missing = [name for name in wanted if name not in found]
    if missing:
        raise ServiceError(f"Not students of {course.code}: {', '.join(missing[:20])}"
                           + (" …" if len(missing) > 20 else "") + ". Nothing was changed.")
    return [found[name] for name in wanted]


def course_extensions(session: Session, course: Course,
                      assignment: CourseAssignment | None = None) -> list[Extension]:
    """The course's standing extensions and, with an assignment, that assignment's."""
    query = select(Extension).join(User, User.id == Extension.user_id).where(
        Extension.course_id == course.id)
    query = query.where(Extension.assignment_id.is_(None)
                        | (Extension.assignment_id == (assignment.id if assignment else -1)))
    return list(session.scalars(query.order_by(User.username, Extension.id).options(
        selectinload(Extension.user), selectinload(Extension.granted_by))))


def extension_for(session: Session, course: Course, extension_id: int) -> Extension:
    extension = session.get(Extension, extension_id)
    if extension is None or extension.course_id != course.id:
        raise NotFound(f"There is no extension {extension_id} in {course.code}.")
    return extension


def revoke_extension(session: Session, extension: Extension) -> None:
    session.delete(extension)
    session.flush()


def adjust_score(session: Session, submission: Submission, *, score: Any, reason: Any,
                 by: User | None) -> ScoreAdjustment:
    """Set the submission's final score by hand (``score`` empty or None: back to the computed
    one), with the reason; recorded with who, when, the old and the new score."""
    text = _text(reason, "reason", required=True)
    maximum = submission.assignment.max_score
    new: float | None
    if score is None or score == "":
        new = None
    else:
        try:
            new = float(score) if not isinstance(score, bool) else math.nan
        except (TypeError, ValueError):
            new = math.nan
        if not math.isfinite(new) or not 0 <= new <= maximum:
            raise ServiceError(f"The score must be a number from 0 to {maximum:g}.")
    current = score_of(session, submission)
    if current.result_id is None:
        raise ServiceError("This submission has no result yet; adjust it once it is graded.")
    adjustment = ScoreAdjustment(submission_id=submission.id, old_score=current.final,
                                 new_score=new, reason=text, by_id=by.id if by else None)
    session.add(adjustment)
    session.flush()
    return adjustment


def adjustments_of(session: Session, submission: Submission) -> list[ScoreAdjustment]:
    return list(session.scalars(select(ScoreAdjustment).where(
        ScoreAdjustment.submission_id == submission.id).order_by(ScoreAdjustment.id.desc())))


def add_comment(session: Session, submission: Submission, *, body: Any,
                by: User | None) -> SubmissionComment:
    comment = SubmissionComment(submission_id=submission.id,
                                body=_text(body, "comment", required=True),
                                author_id=by.id if by else None)
    session.add(comment)
    session.flush()
    return comment


def comments_of(session: Session, submission: Submission) -> list[SubmissionComment]:
    return list(session.scalars(select(SubmissionComment).where(
        SubmissionComment.submission_id == submission.id).order_by(SubmissionComment.id)))


def _text(value: Any, name: str, *, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ServiceError(f"The {name} must be text.")
    text = value.strip()
    if required and not text:
        raise ServiceError(f"Say why: a {name} is required.")
    if len(text) > MAX_TEXT:
        raise ServiceError(f"The {name} is too long ({len(text)} characters; at most "
                           f"{MAX_TEXT}).")
    return text


def extension_json(extension: Extension) -> dict[str, Any]:
    return {"id": extension.id, "student": extension.user.username,
            "assignment": extension.assignment.slug if extension.assignment else None,
            "due_at": extension.due_at.isoformat() if extension.due_at else None,
            "extra_days": extension.extra_days, "reason": extension.reason,
            "granted_by": extension.granted_by.username if extension.granted_by else None,
            "created_at": extension.created_at.isoformat()}


def adjustment_json(adjustment: ScoreAdjustment) -> dict[str, Any]:
    return {"id": adjustment.id, "submission_id": adjustment.submission_id,
            "old_score": adjustment.old_score, "new_score": adjustment.new_score,
            "reason": adjustment.reason, "by": adjustment.by.username if adjustment.by else None,
            "at": adjustment.created_at.isoformat()}


def comment_json(comment: SubmissionComment) -> dict[str, Any]:
    return {"id": comment.id, "body": comment.body,
            "author": (comment.author.display_name or comment.author.username)
            if comment.author else None, "at": comment.created_at.isoformat()}
