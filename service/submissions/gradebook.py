"""The gradebook: each student's deadline, every submission's final score, the one that counts.

One place decides what counts (``standings``); the student pages, the API and so the CLI, the
CSV and Gradescope exports, the LMS passback and webhooks all read scores from here. Lateness and
penalties are derived when read (``service.submissions.lateness``): nothing stored can go stale.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import (
    CourseAssignment,
    CourseRole,
    Enrolment,
    Extension,
    LtiUser,
    Result,
    ScoreAdjustment,
    Submission,
    SubmissionStatus,
    User,
)
from service.submissions.lateness import (
    Attempt,
    LateRule,
    counted_attempt,
    effective_deadline,
    final_score,
    late_days,
)


@dataclass(frozen=True)
class Deadline:
    """A student's deadline for one assignment and the extension that set it, if any."""

    at: datetime | None
    extended_to: datetime | None = None
    extra_days: int = 0

    @property
    def extended(self) -> bool:
        return self.extended_to is not None or self.extra_days > 0

    def describe(self) -> str:
        """The extension in words (empty when there is none), for the CSV and the pages."""
        parts = []
        if self.extended_to is not None:
            parts.append(f"until {self.extended_to:%Y-%m-%d %H:%M} UTC")
        if self.extra_days:
            parts.append(f"+{self.extra_days} day{'s' if self.extra_days != 1 else ''}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Scored:
    """One submission with its score as it stands now (its newest stored result, if any)."""

    submission_id: int
    user_id: int
    submitted_at: datetime
    status: SubmissionStatus
    round: int
    late_days: int
    result_id: int | None
    raw: float | None
    max_score: float | None
    codes: tuple[str, ...]
    adjusted: float | None
    """The instructor's adjustment in force (it replaces the computed final score)."""
    final: float | None

    @property
    def late(self) -> bool:
        return self.late_days > 0


@dataclass(frozen=True)
class Standing:
    """A student on one assignment: their deadline, and the submission that counts."""

    user_id: int
    deadline: Deadline
    submissions: int
    counted: Scored | None
    status: str
    """``graded`` (a counted score), ``pending`` (submitted, not graded yet), ``failed`` (no
    submission could be graded) or ``missing`` (never submitted)."""


def rule_of(assignment: CourseAssignment) -> LateRule:
    return LateRule(assignment.late_policy, assignment.late_penalty_per_day)


def deadlines(session: Session, assignment: CourseAssignment,
              user_ids: Collection[int] | None = None) -> dict[int, Deadline]:
    """The deadline of every student with an extension (others have the assignment's)."""
    query = select(Extension).where(
        Extension.course_id == assignment.course_id,
        Extension.assignment_id.is_(None) | (Extension.assignment_id == assignment.id))
    if user_ids is not None:
        query = query.where(Extension.user_id.in_(list(user_ids)))
    own: dict[int, datetime] = {}
    days: dict[int, int] = {}
    for extension in session.scalars(query.order_by(Extension.id)):
        if extension.assignment_id is not None and extension.due_at is not None:
            own[extension.user_id] = extension.due_at
        elif extension.extra_days:
            days[extension.user_id] = extension.extra_days
    return {user_id: Deadline(effective_deadline(assignment.due_at, extended_to=own.get(user_id),
                                                 extra_days=days.get(user_id, 0)),
                              own.get(user_id), days.get(user_id, 0))
            for user_id in own.keys() | days.keys()}


def deadline_of(session: Session, assignment: CourseAssignment, user_id: int) -> Deadline:
    return deadlines(session, assignment, [user_id]).get(user_id, Deadline(assignment.due_at))


def scored_submissions(session: Session, assignment: CourseAssignment, *,
                       user_ids: Collection[int] | None = None,
                       submission_ids: Collection[int] | None = None,
                       known_deadlines: dict[int, Deadline] | None = None) -> list[Scored]:
    """The assignment's submissions (or these ones), oldest first, scored as they stand now."""
    where = [Submission.assignment_id == assignment.id]
    if user_ids is not None:
        where.append(Submission.user_id.in_(list(user_ids)))
    if submission_ids is not None:
        where.append(Submission.id.in_(list(submission_ids)))
    rows = session.execute(select(Submission.id, Submission.user_id, Submission.requested_at,
                                  Submission.status, Submission.round)
                           .where(*where).order_by(Submission.requested_at, Submission.id)).all()
    results: dict[int, tuple[int, float, float, list[str]]] = {}
    for result_id, submission_id, raw, maximum, codes in session.execute(
            select(Result.id, Result.submission_id, Result.score, Result.max_score, Result.codes)
            .join(Submission, Submission.id == Result.submission_id).where(*where)
            .order_by(Result.round)):
        results[submission_id] = (result_id, raw, maximum, codes)
    adjusted: dict[int, float | None] = {}
    for submission_id, new_score in session.execute(
            select(ScoreAdjustment.submission_id, ScoreAdjustment.new_score)
            .join(Submission, Submission.id == ScoreAdjustment.submission_id).where(*where)
            .order_by(ScoreAdjustment.id)):
        adjusted[submission_id] = new_score
    if known_deadlines is None:
        known_deadlines = deadlines(session, assignment, {row.user_id for row in rows}
                                    if submission_ids is not None else user_ids)
    default, rule = Deadline(assignment.due_at), rule_of(assignment)
    scored = []
    for submission_id, user_id, submitted_at, status, round_ in rows:
        days = late_days(submitted_at, known_deadlines.get(user_id, default).at)
        result = results.get(submission_id)
        adjustment = adjusted.get(submission_id)
        final = None if result is None else final_score(
            result[1], result[2], days_late=days, rule=rule, adjusted=adjustment)
        scored.append(Scored(submission_id, user_id, submitted_at, status, round_, days,
                             result[0] if result else None, result[1] if result else None,
                             result[2] if result else None, tuple(result[3]) if result else (),
                             adjustment, final))
    return scored


def score_of(session: Session, submission: Submission) -> Scored:
    return scored_submissions(session, submission.assignment, submission_ids=[submission.id])[0]


def scores_by_id(session: Session, submissions: Iterable[Submission]) -> dict[int, Scored]:
    """Many submissions scored at once (a few queries per assignment, not per submission)."""
    by_assignment: dict[int, tuple[CourseAssignment, list[int]]] = {}
    for submission in submissions:
        entry = by_assignment.setdefault(submission.assignment_id, (submission.assignment, []))
        entry[1].append(submission.id)
    found: dict[int, Scored] = {}
    for assignment, ids in by_assignment.values():
        found.update((s.submission_id, s)
                     for s in scored_submissions(session, assignment, submission_ids=ids))
    return found


def standings(session: Session, assignment: CourseAssignment,
              user_ids: Collection[int] | None = None, *,
              everything: list[Scored] | None = None) -> dict[int, Standing]:
    """Each student's standing: those given, or every student enrolled in the course.
    ``everything``: the assignment's submissions already scored (saves reading them again)."""
    if user_ids is None:
        user_ids = enrolled_students(session, assignment)
    known = deadlines(session, assignment, user_ids)
    per_user: dict[int, list[Scored]] = {user_id: [] for user_id in user_ids}
    if everything is None:
        everything = scored_submissions(session, assignment, user_ids=user_ids,
                                        known_deadlines=known)
    for scored in everything:
        if scored.user_id in per_user:
            per_user[scored.user_id].append(scored)
    default = Deadline(assignment.due_at)
    return {user_id: _standing(user_id, known.get(user_id, default), rows,
                               assignment) for user_id, rows in per_user.items()}


def _standing(user_id: int, deadline: Deadline, rows: list[Scored],
              assignment: CourseAssignment) -> Standing:
    graded = {s.submission_id: s for s in rows if s.final is not None}
    choice = counted_attempt((Attempt(s.submission_id, s.submitted_at, s.final)
                              for s in graded.values() if s.final is not None),
                             assignment.score_policy)
    counted = graded[choice.submission_id] if choice is not None else None
    if counted is not None:
        status = "graded"
    elif any(s.status in (SubmissionStatus.QUEUED, SubmissionStatus.RUNNING) for s in rows):
        status = "pending"
    else:
        status = "failed" if rows else "missing"
    return Standing(user_id, deadline, len(rows), counted, status)


def counted_score(session: Session, user_id: int, assignment: CourseAssignment
                  ) -> Scored | None:
    """The student's counted submission and its final score (None: nothing graded yet)."""
    return standings(session, assignment, [user_id])[user_id].counted


def enrolled_students(session: Session, assignment: CourseAssignment) -> list[int]:
    return list(session.scalars(select(Enrolment.user_id).where(
        Enrolment.course_id == assignment.course_id, Enrolment.role == CourseRole.STUDENT)))


@dataclass(frozen=True)
class GradebookRow:
    user: User
    lms_id: str
    standing: Standing


def gradebook(session: Session, assignment: CourseAssignment) -> list[GradebookRow]:
    """A row per enrolled student, by user name, with their LMS id where one is known."""
    table = standings(session, assignment)
    users = session.scalars(select(User).where(User.id.in_(list(table)))
                            .order_by(User.username))
    lms_ids: dict[int, str] = {}
    for user_id, sub in session.execute(select(LtiUser.user_id, LtiUser.sub).where(
            LtiUser.user_id.in_(list(table))).order_by(LtiUser.id)):
        lms_ids.setdefault(user_id, sub)
    return [GradebookRow(user, lms_ids.get(user.id, ""), table[user.id]) for user in users]
