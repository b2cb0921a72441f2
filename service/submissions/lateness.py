"""Deadlines, lateness, late penalties and the counted score: pure functions, computed when read.

Nothing here is stored: moving a due date, granting an extension or adjusting a score re-derives
every late flag and every final score at once, without a regrade. No database, no Flask.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from service.models.assignments import LatePolicy, ScorePolicy

DAY = timedelta(days=1)
# Due dates and extensions outside these years are typing mistakes (and years 1 or 9999 cannot
# take a time zone offset without leaving the calendar).
EARLIEST, LATEST = 2000, 2200
"""The years a deadline may be in: far enough from datetime's limits that adding extra days
or time zones can never overflow."""


_ISO_HELP = ("give an ISO 8601 date and time, e.g. 2026-12-01T23:59 (in the assignment's time "
             "zone when no offset is given)")


def plausible_moment(value: object, zone: str) -> datetime:
    """An ISO date and time as UTC (in ``zone`` when it has no offset); ValueError otherwise."""
    if not isinstance(value, str | datetime) or len(str(value)) > 64:
        raise ValueError(_ISO_HELP)
    try:
        moment = datetime.fromisoformat(str(value))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=ZoneInfo(zone))
        moment = moment.astimezone(UTC)
    except OverflowError:
        moment = datetime.min.replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(_ISO_HELP) from None
    if not EARLIEST <= moment.year <= LATEST:
        raise ValueError(f"the year must be between {EARLIEST} and {LATEST}")
    return moment


def effective_deadline(due_at: datetime | None, *, extended_to: datetime | None = None,
                       extra_days: int = 0) -> datetime | None:
    """The student's deadline: the assignment's, moved by their standing extra days, or their
    own deadline for this assignment, whichever is later. An extension never shortens it."""
    candidates = []
    if due_at is not None:
        candidates.append(due_at + max(0, extra_days) * DAY)
    if extended_to is not None:
        candidates.append(extended_to)
    return max(candidates) if candidates else None


def late_days(submitted_at: datetime, deadline: datetime | None) -> int:
    """Started days after the deadline (1 for a second late); 0 when on time, never negative."""
    if deadline is None or submitted_at <= deadline:
        return 0
    return -((deadline - submitted_at) // DAY)


@dataclass(frozen=True)
class LateRule:
    policy: LatePolicy
    penalty_per_day: float
    """The fraction of the score lost per started late day (``penalty`` policy only)."""


def final_score(raw: float, max_score: float, *, days_late: int, rule: LateRule,
                adjusted: float | None = None) -> float:
    """The score that counts, always within [0, max_score]: an instructor's adjustment when
    there is one, otherwise the raw score less the late penalty."""
    if adjusted is not None:
        score = adjusted
    elif rule.policy is LatePolicy.PENALTY and days_late > 0:
        score = raw * max(0.0, 1.0 - max(0.0, rule.penalty_per_day) * days_late)
    else:
        score = raw
    return min(max(round(score, 4), 0.0), max(max_score, 0.0))


@dataclass(frozen=True)
class Attempt:
    """One graded submission, as the choice of the counted one sees it."""

    submission_id: int
    submitted_at: datetime
    final: float


def counted_attempt(attempts: Iterable[Attempt], policy: ScorePolicy) -> Attempt | None:
    """The submission that counts: the latest, or the best (the latest of equal bests)."""
    ordered = sorted(attempts, key=lambda a: (a.submitted_at, a.submission_id))
    if not ordered:
        return None
    if policy is ScorePolicy.LATEST:
        return ordered[-1]
    return max(reversed(ordered), key=lambda a: a.final)
