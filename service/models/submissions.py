"""Submissions with their files, grading state and results (one result per grading round)."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.assignments import CourseAssignment
from service.models.base import Base, IdMixin, utcnow
from service.models.users import User, enum_column


class SubmissionStatus(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    GRADED = "graded"
    FAILED = "failed"


class Submission(IdMixin, Base):
    __tablename__ = "submissions"
    __table_args__ = (
        Index("ix_submissions_owner", "assignment_id", "user_id", "requested_at"),
        Index("ix_submissions_status", "status"),
    )

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    assignment_version: Mapped[str] = mapped_column(String(64))
    status: Mapped[SubmissionStatus] = mapped_column(enum_column(SubmissionStatus),
                                                     default=SubmissionStatus.QUEUED)
    seed: Mapped[int]
    """Probe seed, fixed at submission so every attempt and regrade draws the same inputs."""
    round: Mapped[int] = mapped_column(default=1)
    """Grading round: 1, then one more per regrade; each round stores at most one result."""
    attempts: Mapped[int] = mapped_column(default=0)
    """Times a worker claimed the submission in this round (recorded on each claim)."""
    interruptions: Mapped[int] = mapped_column(default=0)
    """Of those, the claims our infrastructure ended (no sandbox engine, a lost database or
    broker connection, a lost worker): retried without limit, shown to the instructor, never
    counted against the submission. ``attempts - interruptions`` is what the bound counts."""
    workers_lost: Mapped[int] = mapped_column(default=0)
    """Of those, the gradings whose worker process died: bounded separately, so a submission
    that kills its grading process every time cannot occupy workers for ever."""
    attempt_token: Mapped[str | None] = mapped_column(String(32))
    """Token of the claim in force: only its holder may store the result (compare-and-set)."""
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None]
    late: Mapped[bool] = mapped_column(default=False)
    """Late against the deadline in force when it was submitted: a record only. Lateness is
    derived when read (``service.submissions.gradebook``), so deadlines and extensions can move."""
    message: Mapped[str | None] = mapped_column(Text)
    """What the student reads when grading failed for reasons not their own."""
    requested_at: Mapped[datetime] = mapped_column(default=utcnow)
    enqueued_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    graded_at: Mapped[datetime | None]

    user: Mapped[User] = relationship()
    assignment: Mapped[CourseAssignment] = relationship()
    files: Mapped[list[SubmissionFile]] = relationship(back_populates="submission",
                                                       order_by="SubmissionFile.name")
    results: Mapped[list[Result]] = relationship(back_populates="submission",
                                                 order_by="Result.round")

    @property
    def result(self) -> Result | None:
        """The newest stored result: during a regrade, the previous round's stays in force
        until the new round stores its own."""
        return self.results[-1] if self.results else None


class SubmissionFile(IdMixin, Base):
    __tablename__ = "submission_files"
    __table_args__ = (UniqueConstraint("submission_id", "name"),)

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int]
    content: Mapped[bytes] = mapped_column(LargeBinary)

    submission: Mapped[Submission] = relationship(back_populates="files")


class Result(IdMixin, Base):
    __tablename__ = "results"
    __table_args__ = (UniqueConstraint("submission_id", "round"),)

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    round: Mapped[int]
    score: Mapped[float]
    """The document's score, before any late penalty."""
    final_score: Mapped[float]
    """The score after the late policy as it stood when the result was stored: a record only.
    The final score is derived when read (``service.submissions.gradebook``), so it is never
    stale."""
    max_score: Mapped[float]
    codes: Mapped[list[str]]
    document: Mapped[dict[str, Any]]
    """The SPEC §3 results document, complete (students get a filtered view)."""
    attempt_token: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    submission: Mapped[Submission] = relationship(back_populates="results")
