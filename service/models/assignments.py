"""Assignments offered in a course, and the content-hashed versions synced from ``assignments/``."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.base import Base, CreatedMixin, IdMixin
from service.models.courses import Course
from service.models.users import enum_column


class LatePolicy(enum.Enum):
    ACCEPT = "accept"
    """Late submissions are graded and flagged."""
    PENALTY = "penalty"
    """Graded; the final score loses ``late_penalty_per_day`` (a fraction of the score) per
    started day after the student's deadline (``service.submissions.lateness``)."""
    REJECT = "reject"
    """Refused after the due date."""


class ScorePolicy(enum.Enum):
    """Which of a student's graded submissions counts
    (``service.submissions.gradebook.standings``)."""

    BEST = "best"
    LATEST = "latest"


class CourseAssignment(IdMixin, CreatedMixin, Base):
    __tablename__ = "assignments"
    __table_args__ = (UniqueConstraint("course_id", "slug"),)

    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    slug: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(64))
    """The content hash of the package currently graded."""
    max_score: Mapped[float]
    due_at: Mapped[datetime | None]
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC")
    """The IANA zone the instructor set the due date in; pages show deadlines in it."""
    late_policy: Mapped[LatePolicy] = mapped_column(enum_column(LatePolicy),
                                                    default=LatePolicy.ACCEPT)
    late_penalty_per_day: Mapped[float] = mapped_column(default=0.0)
    rate_limit_count: Mapped[int | None]
    """Submissions a student may make per window (None: the service default)."""
    rate_limit_window_seconds: Mapped[int | None]
    published: Mapped[bool] = mapped_column(default=True)
    """Whether students of the course see the assignment at all."""
    results_published: Mapped[bool] = mapped_column(default=False)
    """Releases ``after_published`` checks (and ``hidden`` ones) to students."""
    score_policy: Mapped[ScorePolicy] = mapped_column(enum_column(ScorePolicy),
                                                      default=ScorePolicy.BEST)
    """The counted score, everywhere: the best or the latest graded submission's final score."""

    course: Mapped[Course] = relationship()
    versions: Mapped[list[AssignmentVersion]] = relationship(back_populates="assignment",
                                                             order_by="AssignmentVersion.id")


class AssignmentVersion(IdMixin, Base):
    """One content hash of a package, with its checks as they were then."""

    __tablename__ = "assignment_versions"
    __table_args__ = (UniqueConstraint("assignment_id", "version"),)

    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    version: Mapped[str] = mapped_column(String(64))
    max_score: Mapped[float]
    checks: Mapped[dict[str, Any]]
    """``{"checks": [{number, name, points, visibility}, ...]}``."""
    synced_at: Mapped[datetime]

    assignment: Mapped[CourseAssignment] = relationship(back_populates="versions")
