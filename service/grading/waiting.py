"""Submissions waiting for a grading machine: the message they carry while the sandbox is
unavailable, and what the dashboard says about it (no grading code: the web process reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.models import Submission, SubmissionStatus

WAITING_MESSAGE = (
    "Waiting for a grading machine: the grading sandbox is unavailable right now (not because "
    "of your code). Nothing to do: it will be graded by itself as soon as the sandbox is back, "
    "and this wait uses none of your attempts.")
VERSION_WAITING_MESSAGE = (
    "Waiting for a grading machine that holds the version of this assignment you submitted "
    "against (not because of your code). Nothing to do: it will be graded by itself, with that "
    "version, and this wait uses none of your attempts.")


@dataclass(frozen=True)
class SandboxStatus:
    """What the dashboard says about the grading machines: submissions waiting for one."""

    waiting: int
    waiting_since: datetime | None

    @property
    def unavailable(self) -> bool:
        return self.waiting > 0


def sandbox_status(session: Session) -> SandboxStatus:
    """Submissions queued because the sandbox was unavailable at their last try (they grade by
    themselves when it is back; the message is cleared when they are graded)."""
    count, since = session.execute(
        select(func.count(), func.min(Submission.requested_at)).where(
            Submission.status.in_((SubmissionStatus.QUEUED, SubmissionStatus.RUNNING)),
            Submission.message == WAITING_MESSAGE)).one()
    return SandboxStatus(int(count or 0), since)
