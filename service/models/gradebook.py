"""The gradebook's own records: extensions, manual score adjustments, comments, regrade runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.assignments import CourseAssignment
from service.models.base import Base, CreatedMixin, IdMixin
from service.models.courses import Course
from service.models.submissions import Submission
from service.models.users import User


class Extension(IdMixin, CreatedMixin, Base):
    """More time for one student: a new deadline for one assignment (``assignment_id`` and
    ``due_at``), or a standing number of extra days on every assignment of the course
    (``assignment_id`` None, ``extra_days``). The later of what applies is the deadline."""

    __tablename__ = "extensions"
    __table_args__ = (Index("ix_extensions_student", "course_id", "user_id"),)

    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    assignment_id: Mapped[int | None] = mapped_column(
        ForeignKey("assignments.id", ondelete="CASCADE"))
    due_at: Mapped[datetime | None]
    extra_days: Mapped[int | None]
    reason: Mapped[str] = mapped_column(Text, default="")
    granted_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))

    course: Mapped[Course] = relationship()
    user: Mapped[User] = relationship(foreign_keys=[user_id])
    assignment: Mapped[CourseAssignment | None] = relationship()
    granted_by: Mapped[User | None] = relationship(foreign_keys=[granted_by_id])


class ScoreAdjustment(IdMixin, CreatedMixin, Base):
    """An instructor's change of a submission's final score: the audit trail (who, when, old,
    new, why). The newest row of a submission is in force; ``new_score`` None lifts it. A row
    with ``regrade_run_id`` was written by that regrade: the score kept by a feedback-only
    regrade, or such a kept score lifted by a later regrade that updates the scores."""

    __tablename__ = "score_adjustments"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"),
                                               index=True)
    old_score: Mapped[float | None]
    """The final score the students saw before (after the late policy, or a former adjustment)."""
    new_score: Mapped[float | None]
    reason: Mapped[str] = mapped_column(Text)
    by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    regrade_run_id: Mapped[int | None] = mapped_column(
        ForeignKey("regrade_runs.id", ondelete="SET NULL"), index=True)

    submission: Mapped[Submission] = relationship()
    by: Mapped[User | None] = relationship()


class SubmissionComment(IdMixin, CreatedMixin, Base):
    """A note from an instructor to the student on one submission."""

    __tablename__ = "submission_comments"

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"),
                                               index=True)
    author_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    body: Mapped[str] = mapped_column(Text)

    author: Mapped[User | None] = relationship()


class RegradeRun(IdMixin, CreatedMixin, Base):
    """One "regrade all": which submissions, and their results before, to report what changed."""

    __tablename__ = "regrade_runs"

    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"),
                                               index=True)
    scope: Mapped[str] = mapped_column(String(16))
    """``counted`` (each student's counted submission), ``all`` or ``group`` (an unexplained
    group's submissions)."""
    keep_scores: Mapped[bool] = mapped_column(default=False, server_default=false())
    """New feedback only: each regraded submission's final score was kept as it stood."""
    started_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    before: Mapped[dict[str, Any]]
    """``{submission_id: {"round", "score", "codes"}}`` as they were when the run started."""

    started_by: Mapped[User | None] = relationship()
