"""What a finished submission owes the outside world: webhook events, the score in the LMS.

Each destination is a ``Channel``. When a submission is graded or gives up, every channel records
its deliveries in the same transaction as the result (a transactional outbox: a crash between the
commit and the sending loses nothing), then, after the commit, sends the tasks that deliver them.
A periodic task sends again whatever is due and was never sent or whose task was lost. How a
delivery is then sent, retried and given up is ``service.grading.outbox``'s, the same for every
channel.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.orm import Session

from service.core.extensions import Shared
from service.models import Submission

log = logging.getLogger(__name__)


class Event(enum.Enum):
    GRADED = "submission.graded"
    FAILED = "submission.failed"


class Channel(Protocol):
    """A destination of finished submissions (webhooks, LTI grade passback)."""

    name: str

    def record(self, session: Session, submission: Submission, event: Event) -> None:
        """Add the deliveries this event owes to ``session``; the caller commits them together
        with the result. Adds nothing when the channel has nowhere to deliver."""

    def send_due(self, session: Session, *, submission_id: int | None = None) -> int:
        """Send the task of every delivery that is due (of one submission, or all); returns how
        many were sent. Runs after the commit, and periodically to catch lost sends."""


@dataclass(frozen=True)
class Announcer:
    """The channels of this app, in the order they were registered when it was built."""

    channels: Sequence[Channel] = ()

    def record(self, session: Session, submission: Submission, event: Event) -> None:
        for channel in self.channels:
            channel.record(session, submission, event)

    def send(self, session: Session, submission_id: int) -> None:
        """After the commit. A failure to send loses nothing: the periodic task sends it later."""
        for channel in self.channels:
            try:
                channel.send_due(session, submission_id=submission_id)
            except Exception as exc:
                session.rollback()
                log.warning("%s: could not send the deliveries of submission %s (%s); the "
                            "periodic task will", channel.name, submission_id,
                            type(exc).__name__)

    def send_all_due(self, session: Session) -> dict[str, int]:
        return {channel.name: channel.send_due(session) for channel in self.channels}


SILENT = Announcer()
"""No channels: what the grading functions use when a caller gives none (tests of the core)."""

announcer: Shared[Announcer] = Shared("autograde.announcer")
"""The channels finished submissions are delivered on; the worker's, built on first use
(``service.tasks``)."""
