"""What instructors do with an assignment: browse submissions, regrade, export, set policies."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.errors import ServiceError
from service.models import (
    CourseAssignment,
    LatePolicy,
    ScorePolicy,
    Submission,
    SubmissionStatus,
    User,
)
from service.submissions import requeue_for_regrade


def list_submissions(session: Session, assignment: CourseAssignment, *,
                     status: str | None = None, username: str | None = None,
                     latest: bool = False, limit: int = 100, offset: int = 0) -> list[Submission]:
    query = select(Submission).join(User).where(Submission.assignment_id == assignment.id)
    if status is not None:
        query = query.where(Submission.status == _status(status))
    if username is not None:
        query = query.where(User.username == username)
    rows = list(session.scalars(query.order_by(Submission.id.desc())))
    if latest:
        newest: dict[int, Submission] = {}
        for row in rows:
            newest.setdefault(row.user_id, row)
        rows = list(newest.values())
    return rows[offset:offset + limit]


def _status(value: str) -> SubmissionStatus:
    try:
        return SubmissionStatus(value)
    except ValueError:
        names = ", ".join(s.value for s in SubmissionStatus)
        raise ServiceError(f"Unknown status {value!r}; use one of {names}.") from None


def regrade(session: Session, submissions: list[Submission],
            enqueue: Callable[[int], None]) -> list[int]:
    """Start a new round for each finished submission; enqueue after the commit."""
    chosen = [s.id for s in submissions if requeue_for_regrade(s)]
    session.commit()
    for submission_id in chosen:
        enqueue(submission_id)
    return chosen


CSV_COLUMNS = ["username", "submission_id", "status", "score", "final_score", "max_score",
               "late", "codes", "requested_at", "graded_at"]


def scores_csv(submissions: list[Submission]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for s in submissions:
        result = s.result
        writer.writerow([
            s.user.username, s.id, s.status.value,
            _num(result.score if result else None), _num(result.final_score if result else None),
            _num(result.max_score if result else None), "yes" if s.late else "no",
            " ".join(result.codes) if result else "", s.requested_at.isoformat(),
            s.graded_at.isoformat() if s.graded_at else "",
        ])
    return out.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


_GRADESCOPE_KEYS = ("score", "execution_time", "output", "tests")
_GRADESCOPE_TEST_KEYS = ("name", "number", "score", "max_score", "status", "output",
                         "visibility", "tags")


def export_scores_csv(session: Session, assignment: CourseAssignment, *,
                      every_submission: bool) -> str:
    """The scores CSV of an assignment: each student's latest submission, or every one."""
    rows = list_submissions(session, assignment, latest=not every_submission, limit=10**6)
    return scores_csv(rows)


def export_gradescope_document(session: Session, assignment: CourseAssignment) -> dict[str, Any]:
    """Each student's latest submission with its result in Gradescope's ``results.json`` form."""
    rows = list_submissions(session, assignment, latest=True, limit=10**6)
    return {"submissions": [{"username": s.user.username, "submission_id": s.id,
                             "results": gradescope_results(s)} for s in rows]}


def gradescope_results(submission: Submission) -> dict[str, Any] | None:
    """The submission's result as Gradescope's ``results.json`` (late policy applied)."""
    result = submission.result
    if result is None:
        return None
    document = result.document
    body = {key: document[key] for key in _GRADESCOPE_KEYS if key in document}
    body["score"] = result.final_score
    body["tests"] = [{k: t[k] for k in _GRADESCOPE_TEST_KEYS if k in t} for t in document["tests"]]
    return body


SETTINGS: dict[str, Callable[[Any], Any]] = {
    "due_at": lambda v: None if v is None else _datetime(v),
    "late_policy": lambda v: LatePolicy(v),
    "late_penalty_per_day": lambda v: _bounded(_number(v), 0.0, 1.0),
    "rate_limit_count": lambda v: None if v is None else _bounded(_integer(v), 1, 100000),
    "rate_limit_window_seconds": lambda v: None if v is None else _bounded(_integer(v), 1,
                                                                           10**8),
    "published": lambda v: _bool(v),
    "results_published": lambda v: _bool(v),
    "score_policy": lambda v: ScorePolicy(v),
}


def update_settings(assignment: CourseAssignment, changes: Mapping[str, Any]) -> None:
    unknown = set(changes) - set(SETTINGS)
    if unknown:
        raise ServiceError(f"Unknown setting(s): {', '.join(sorted(unknown))}; known: "
                           f"{', '.join(SETTINGS)}.")
    for name, value in changes.items():
        try:
            setattr(assignment, name, SETTINGS[name](value))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ServiceError(f"Invalid value for {name}: {exc}") from None


# Due dates outside these years are typing mistakes (and years 1 or 9999 cannot take a time
# zone offset without leaving the calendar).
DUE_YEARS = (2000, 2200)


def _datetime(value: Any) -> datetime:
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError("give an ISO 8601 date and time, e.g. 2026-12-01T23:59:00+00:00")
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError("give a time zone, e.g. 2026-12-01T23:59:00+00:00")
    if not DUE_YEARS[0] <= moment.year <= DUE_YEARS[1]:
        raise ValueError(f"the year must be between {DUE_YEARS[0]} and {DUE_YEARS[1]}")
    return moment.astimezone(UTC)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


def _integer(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number")
    return value


def _bounded(value: Any, low: Any, high: Any) -> Any:
    if not low <= value <= high:
        raise ValueError(f"must be between {low} and {high}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value
