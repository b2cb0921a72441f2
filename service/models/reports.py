"""Reports computed in the background for instructors: the similarity report of an assignment."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from service.models.base import Base, CreatedMixin, IdMixin, utcnow
from service.models.users import enum_column


class ReportStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class SimilarityRun(IdMixin, CreatedMixin, Base):
    """One computation of an assignment's similarity report, with its progress and its answer.

    ``key`` says what was compared (a digest of the counted submissions and the boilerplate),
    so a report stays the answer until a student's counted submission changes."""

    __tablename__ = "similarity_runs"

    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"),
                                               index=True)
    requested_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"))
    key: Mapped[str] = mapped_column(String(64))
    status: Mapped[ReportStatus] = mapped_column(enum_column(ReportStatus),
                                                 default=ReportStatus.QUEUED)
    done: Mapped[int] = mapped_column(default=0)
    """Pairs compared so far."""
    total: Mapped[int] = mapped_column(default=0)
    """Pairs to compare (known once the run starts)."""
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    """Last sign of life: a run that shows none for a while is taken as lost."""
    finished_at: Mapped[datetime | None]
    report: Mapped[dict[str, Any] | None]
    error: Mapped[str | None] = mapped_column(Text)
