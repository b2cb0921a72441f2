"""What instructors do with an assignment: browse submissions, regrade, export, set policies.

Shared by the API, the dashboard pages and the admin CLI, so every surface validates the same way
and refuses the same things with the same messages.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from service.core.errors import NotFound, ServiceError
from service.core.visible import CSVWriter
from service.models import (
    CourseAssignment,
    LatePolicy,
    RegradeRun,
    Result,
    ScoreAdjustment,
    ScorePolicy,
    Submission,
    SubmissionStatus,
    User,
)
from service.submissions.gradebook import (
    GradebookRow,
    Scored,
    gradebook,
    scored_submissions,
    standings,
)
from service.submissions.lateness import plausible_moment
from service.submissions.submitting import requeue_for_regrade


def list_submissions(session: Session, assignment: CourseAssignment, *,
                     status: str | None = None, username: str | None = None,
                     latest: bool = False, counted: bool = False, limit: int = 100,
                     offset: int = 0) -> tuple[list[Submission], int]:
    """A slice of the assignment's submissions, newest first, and how many match in all.
    ``latest``: each student's newest only; ``counted``: each student's counted one only."""
    query = select(Submission.id, Submission.user_id).join(User).where(
        Submission.assignment_id == assignment.id)
    if status is not None:
        query = query.where(Submission.status == _status(status))
    if username is not None:
        query = query.where(User.username == username)
    rows = session.execute(query.order_by(Submission.id.desc())).all()
    if latest:
        newest: dict[int, int] = {}
        for submission_id, user_id in rows:
            newest.setdefault(user_id, submission_id)
        ids = list(newest.values())
    else:
        ids = [submission_id for submission_id, _ in rows]
    if counted:
        users = {user_id for _, user_id in rows}
        chosen = {s.counted.submission_id for s in standings(session, assignment, users).values()
                  if s.counted is not None}
        ids = [i for i in ids if i in chosen]
    return load_submissions(session, ids[offset:offset + limit]), len(ids)


def load_submissions(session: Session, ids: list[int]) -> list[Submission]:
    """These submissions, in this order, with what their rows show loaded at once."""
    found = {s.id: s for s in session.scalars(
        select(Submission).where(Submission.id.in_(ids))
        .options(selectinload(Submission.user),
                 selectinload(Submission.results).defer(Result.document)))}
    return [found[i] for i in ids if i in found]


def _status(value: str) -> SubmissionStatus:
    try:
        return SubmissionStatus(value)
    except ValueError:
        names = ", ".join(s.value for s in SubmissionStatus)
        raise ServiceError(f"Unknown status {value!r}; use one of {names}.") from None


def regrade(session: Session, submissions: list[Submission],
            enqueue: Callable[[int], None]) -> list[int]:
    """Start a new round for each finished submission; enqueue after the commit. The previous
    result stays in force until the new round stores its own."""
    chosen = [s.id for s in submissions if requeue_for_regrade(s)]
    session.commit()
    for submission_id in chosen:
        enqueue(submission_id)
    return chosen


REGRADE_SCOPES = {"counted": "each student's counted submission",
                  "all": "every submission",
                  "group": "a group of unexplained submissions"}

REGRADE_SCORES = {"update": "update the scores: the new results count",
                  "keep": "new feedback only: keep each student's score"}
"""What a regrade does to the scores; the students read the new codes and words either way."""


def regrade_keeps_scores(value: Any, *, default: bool = False) -> bool:
    """The ``scores`` choice of a regrade form or request: ``update`` or ``keep``; none given:
    ``default``."""
    if value is None or value == "":
        return default
    if value not in REGRADE_SCORES:
        raise ServiceError(f"Unknown scores choice {value!r}; use update (the new results "
                           "count) or keep (new feedback only, each score kept).")
    return bool(value == "keep")


def kept_reason(run_id: int) -> str:
    return f"Regraded for feedback (regrade {run_id}); score kept by the instructor."


def start_regrade(session: Session, assignment: CourseAssignment, *, scope: str,
                  by: User | None, enqueue: Callable[[int], None],
                  submission_ids: list[int] | None = None,
                  keep_scores: bool = False) -> RegradeRun:
    """Regrade the counted submissions (``counted``), every one (``all``) or the given ones of
    this assignment (``group``), remembering their results as they were, so the run can say
    what changed.

    ``keep_scores``: new feedback only. Each regraded submission's final score is kept as it
    stands, written in the gradebook as a score adjustment of this run (who, when, why), so
    the new round's codes and words are what the student reads while the score that counts
    does not move, not even while the round runs. Without it, the new results count, and a
    score an earlier feedback-only regrade kept is lifted (a row of this run says so);
    adjustments made by hand stay in force, as they always do across regrades."""
    if scope not in REGRADE_SCOPES or (scope == "group") != (submission_ids is not None):
        raise ServiceError(f"Unknown regrade scope {scope!r}; use counted or all.")
    if submission_ids is not None:
        ids = list(session.scalars(select(Submission.id).where(
            Submission.assignment_id == assignment.id, Submission.id.in_(submission_ids))))
    elif scope == "counted":
        ids = [s.counted.submission_id for s in standings(session, assignment).values()
               if s.counted is not None]
    else:
        ids = list(session.scalars(select(Submission.id).where(
            Submission.assignment_id == assignment.id)))
    before = {s.submission_id: s for s in scored_submissions(session, assignment,
                                                             submission_ids=ids)}
    chosen = [s.id for s in session.scalars(select(Submission).where(Submission.id.in_(ids)))
              if requeue_for_regrade(s)]
    run = RegradeRun(assignment_id=assignment.id, scope=scope, keep_scores=keep_scores,
                     started_by_id=by.id if by else None,
                     before={str(i): {"round": before[i].round, "score": before[i].raw,
                                      "codes": list(before[i].codes)} for i in chosen})
    session.add(run)
    session.flush()
    _settle_scores(session, run, [before[i] for i in chosen], by)
    session.commit()
    for submission_id in chosen:
        enqueue(submission_id)
    return run


def _settle_scores(session: Session, run: RegradeRun, chosen: list[Scored],
                   by: User | None) -> None:
    """Keep each score (a feedback-only run), or lift the scores earlier feedback-only runs
    kept (a run that updates the scores)."""
    by_id = by.id if by else None
    in_force: dict[int, ScoreAdjustment] = {}
    for adjustment in session.scalars(select(ScoreAdjustment).where(
            ScoreAdjustment.submission_id.in_([s.submission_id for s in chosen]))
            .order_by(ScoreAdjustment.id)):
        in_force[adjustment.submission_id] = adjustment
    if run.keep_scores:
        # A score set by hand stays in force either way: writing nothing for it keeps a
        # later "update" from lifting the instructor's own adjustment with the kept one.
        by_hand = {i for i, a in in_force.items()
                   if a.regrade_run_id is None and a.new_score is not None}
        session.add_all(ScoreAdjustment(submission_id=s.submission_id, old_score=s.final,
                                        new_score=s.final, reason=kept_reason(run.id),
                                        by_id=by_id, regrade_run_id=run.id)
                        for s in chosen
                        if s.final is not None and s.submission_id not in by_hand)
        session.flush()
        return
    for scored in chosen:
        kept = in_force.get(scored.submission_id)
        if kept is None or kept.regrade_run_id is None or kept.new_score is None:
            continue
        session.add(ScoreAdjustment(
            submission_id=scored.submission_id, old_score=scored.final, new_score=None,
            reason=f"Regraded with the scores updated (regrade {run.id}); the score kept by "
                   f"regrade {kept.regrade_run_id} is lifted.",
            by_id=by_id, regrade_run_id=run.id))
    session.flush()


def latest_regrade(session: Session, assignment: CourseAssignment) -> RegradeRun | None:
    return session.scalar(select(RegradeRun).where(RegradeRun.assignment_id == assignment.id)
                          .order_by(RegradeRun.id.desc()).limit(1))


def regrade_run(session: Session, assignment: CourseAssignment, run_id: int) -> RegradeRun:
    run = session.get(RegradeRun, run_id)
    if run is None or run.assignment_id != assignment.id:
        raise NotFound(f"There is no regrade {run_id} of {assignment.slug}.")
    return run


def regrade_report(session: Session, run: RegradeRun) -> dict[str, Any]:
    """How far the run has got and, for the submissions done, what changed: the raw scores
    (``up``, ``down``, ``same``), the codes, and, for a feedback-only run, the final scores it
    kept (``kept``: each ``submission_id`` and its kept ``score``; a change's ``kept`` is its
    kept score or None); ``lifted``: the scores kept by an earlier run that this one lifted."""
    ids = [int(key) for key in run.before]
    assignment = session.get(CourseAssignment, run.assignment_id)
    assert assignment is not None
    now = {s.submission_id: s for s in scored_submissions(session, assignment,
                                                          submission_ids=ids)}
    written = {a.submission_id: a for a in session.scalars(
        select(ScoreAdjustment).where(ScoreAdjustment.regrade_run_id == run.id)
        .order_by(ScoreAdjustment.id))}
    kept = {i: a.new_score for i, a in written.items() if a.new_score is not None}
    counts = Counter[str]()
    gained, lost = Counter[str](), Counter[str]()
    changes = []
    for key, before in run.before.items():
        current = now.get(int(key))
        if current is None:
            counts["gone"] += 1
            continue
        if current.status in (SubmissionStatus.QUEUED, SubmissionStatus.RUNNING):
            counts[current.status.value] += 1
            continue
        if current.status is SubmissionStatus.FAILED or current.round <= before["round"]:
            counts["failed"] += 1
            continue
        counts["done"] += 1
        change = _change(before, current)
        change["kept"] = kept.get(current.submission_id)
        counts[change["direction"]] += 1
        gained.update(change["gained"])
        lost.update(change["lost"])
        if change["direction"] != "same" or change["gained"] or change["lost"]:
            changes.append(change)
    finished = counts["done"] + counts["failed"] + counts["gone"]
    return {"id": run.id, "scope": run.scope, "started_at": run.created_at.isoformat(),
            "started_by": run.started_by.username if run.started_by else None,
            "total": len(run.before), "done": counts["done"], "queued": counts["queued"],
            "running": counts["running"], "failed": counts["failed"],
            "finished": finished == len(run.before),
            "up": counts["up"], "down": counts["down"], "same": counts["same"],
            "codes_gained": dict(gained.most_common()), "codes_lost": dict(lost.most_common()),
            "changes": changes, "keep_scores": run.keep_scores,
            "kept": [{"submission_id": i, "score": score} for i, score in sorted(kept.items())],
            "lifted": sorted(i for i, a in written.items() if a.new_score is None)}


def _change(before: Mapping[str, Any], current: Scored) -> dict[str, Any]:
    old, new = before["score"], current.raw
    if old is None or new is None or old == new:
        direction = "same" if old == new else ("up" if old is None else "down")
    else:
        direction = "up" if new > old else "down"
    return {"submission_id": current.submission_id, "before": old, "after": new,
            "direction": direction,
            "gained": sorted(set(current.codes) - set(before["codes"])),
            "lost": sorted(set(before["codes"]) - set(current.codes))}


GRADEBOOK_COLUMNS = ["username", "display_name", "lms_id", "status", "submission_id",
                     "submitted_at", "deadline", "extension", "late_days", "raw_score",
                     "final_score", "max_score", "adjusted", "codes"]
EVERY_SUBMISSION_COLUMNS = ["username", "display_name", "lms_id", "submission_id", "status",
                            "round", "submitted_at", "deadline", "late_days", "raw_score",
                            "final_score", "max_score", "adjusted", "counted", "codes"]


def export_scores_csv(session: Session, assignment: CourseAssignment, *,
                      every_submission: bool) -> str:
    """The scores CSV: a row per enrolled student with the counted submission (empty scores
    and status ``missing`` for a student who never submitted), or a row per submission."""
    out = io.StringIO()
    writer = CSVWriter(out)
    rows = gradebook(session, assignment)
    if not every_submission:
        writer.writerow(GRADEBOOK_COLUMNS)
        for row in rows:
            standing, counted = row.standing, row.standing.counted
            writer.writerow([
                row.user.username, row.user.display_name, row.lms_id, standing.status,
                counted.submission_id if counted else "",
                counted.submitted_at.isoformat() if counted else "",
                _moment(standing.deadline.at), standing.deadline.describe(),
                counted.late_days if counted else "", _num(counted.raw if counted else None),
                _num(counted.final if counted else None), _num(assignment.max_score),
                _num(counted.adjusted if counted else None),
                " ".join(counted.codes) if counted else ""])
        return out.getvalue()
    writer.writerow(EVERY_SUBMISSION_COLUMNS)
    by_user = {row.user.id: row for row in rows}
    counted_ids = {row.standing.counted.submission_id for row in rows if row.standing.counted}
    for scored in scored_submissions(session, assignment, user_ids=list(by_user)):
        row = by_user[scored.user_id]
        writer.writerow([
            row.user.username, row.user.display_name, row.lms_id, scored.submission_id,
            scored.status.value, scored.round, scored.submitted_at.isoformat(),
            _moment(row.standing.deadline.at), scored.late_days, _num(scored.raw),
            _num(scored.final), _num(scored.max_score or assignment.max_score),
            _num(scored.adjusted), "yes" if scored.submission_id in counted_ids else "no",
            " ".join(scored.codes)])
    return out.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _moment(value: datetime | None) -> str:
    return value.isoformat() if value is not None else ""


_GRADESCOPE_KEYS = ("score", "execution_time", "output", "tests")
_GRADESCOPE_TEST_KEYS = ("name", "number", "score", "max_score", "status", "output",
                         "visibility", "tags")


def export_gradescope_document(session: Session, assignment: CourseAssignment) -> dict[str, Any]:
    """Each enrolled student's counted submission in Gradescope's ``results.json`` form."""
    rows = gradebook(session, assignment)
    ids = [row.standing.counted.result_id for row in rows if row.standing.counted]
    documents: dict[int, dict[str, Any]] = dict(session.execute(
        select(Result.id, Result.document).where(Result.id.in_(ids))).all())
    entries = []
    for row in rows:
        counted = row.standing.counted
        if counted is None or counted.result_id is None or counted.final is None:
            continue
        entries.append({"username": row.user.username, "submission_id": counted.submission_id,
                        "results": gradescope_results(documents[counted.result_id],
                                                      counted.final)})
    return {"submissions": entries}


def gradescope_results(document: Mapping[str, Any], final: float) -> dict[str, Any]:
    """A results document as Gradescope's ``results.json``, scored with the final score."""
    body = {key: document[key] for key in _GRADESCOPE_KEYS if key in document}
    body["score"] = final
    body["tests"] = [{k: t[k] for k in _GRADESCOPE_TEST_KEYS if k in t} for t in document["tests"]]
    return body


def _optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None or value == "" else parse(value)


def _choice(kind: type[LatePolicy] | type[ScorePolicy]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        try:
            return kind(value)
        except ValueError:
            raise ValueError(f"{value!r} is not one of "
                             f"{', '.join(m.value for m in kind)}") from None
    return parse


SETTINGS: dict[str, Callable[[Any], Any]] = {
    "due_at": lambda v: v,  # parsed with the time zone, below
    "time_zone": lambda v: _zone(v),
    "late_policy": _choice(LatePolicy),
    "late_penalty_per_day": lambda v: _bounded(_number(v), 0.0, 1.0),
    "rate_limit_count": _optional(lambda v: _bounded(_whole(v), 1, 100000)),
    "rate_limit_window_seconds": _optional(lambda v: _bounded(_whole(v), 1, 10**8)),
    "published": lambda v: _bool(v),
    "results_published": lambda v: _bool(v),
    "score_policy": _choice(ScorePolicy),
}


def validate_settings(assignment: CourseAssignment, changes: Mapping[str, Any]
                      ) -> dict[str, Any]:
    """The changes checked and converted, or a ServiceError saying what is wrong. The API, the
    settings page and the CLI all go through here."""
    unknown = set(changes) - set(SETTINGS)
    if unknown:
        raise ServiceError(f"Unknown setting(s): {', '.join(sorted(unknown))}; known: "
                           f"{', '.join(SETTINGS)}.")
    values: dict[str, Any] = {}
    for name, value in changes.items():
        try:
            values[name] = SETTINGS[name](value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ServiceError(f"Invalid value for {name}: {exc}") from None
    if "due_at" in values:
        zone = values.get("time_zone", assignment.time_zone)
        try:
            values["due_at"] = _optional(lambda v: _datetime(v, zone))(values["due_at"])
        except (TypeError, ValueError) as exc:
            raise ServiceError(f"Invalid value for due_at: {exc}") from None
    return values


def update_settings(session: Session, assignment: CourseAssignment,
                    changes: Mapping[str, Any]) -> None:
    """Validate and apply ``changes`` (not committed). Callers outside this module go through
    ``service.lti.release.apply_settings``, which commits and sends what a release lets
    go."""
    for name, value in validate_settings(assignment, changes).items():
        setattr(assignment, name, value)
    session.flush()


def _zone(value: Any) -> str:
    name = str(value or "UTC")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as "
                         "Europe/Paris)") from None
    return name


def time_zones() -> list[str]:
    return ["UTC", *sorted(z for z in available_timezones() if "/" in z)]


def _datetime(value: Any, zone: str) -> datetime:
    return plausible_moment(value, zone)


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("must be a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


def _whole(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError("must be a whole number")
    return int(value)


def _bounded(value: Any, low: Any, high: Any) -> Any:
    if not low <= value <= high:
        raise ValueError(f"must be between {low} and {high}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def gradebook_row_json(row: GradebookRow) -> dict[str, Any]:
    """A CSV row of the gradebook, as JSON."""
    standing, counted = row.standing, row.standing.counted
    return {"username": row.user.username, "display_name": row.user.display_name,
            "lms_id": row.lms_id or None, "status": standing.status,
            "submission_id": counted.submission_id if counted else None,
            "submitted_at": counted.submitted_at.isoformat() if counted else None,
            "deadline": standing.deadline.at.isoformat() if standing.deadline.at else None,
            "extension": standing.deadline.describe() or None,
            "late_days": counted.late_days if counted else None,
            "raw_score": counted.raw if counted else None,
            "final_score": counted.final if counted else None,
            "adjusted": counted.adjusted if counted else None,
            "codes": list(counted.codes) if counted else []}
