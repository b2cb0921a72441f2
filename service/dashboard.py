"""What the web pages need beyond the API's service functions: dashboard statistics and filters."""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from service.courses import course_role
from service.errors import ServiceError
from service.models import (
    Course,
    CourseAssignment,
    CourseRole,
    Enrolment,
    Result,
    Role,
    Submission,
    SubmissionStatus,
    User,
)
from service.submissions import submission_json

HISTOGRAM_BINS = 10


def taught_assignments(session: Session, user: User) -> list[CourseAssignment]:
    """Assignments of the courses this user teaches (every course for an admin)."""
    query = select(CourseAssignment).join(Course).order_by(Course.code, CourseAssignment.slug)
    if user.role is not Role.ADMIN:
        query = query.join(Enrolment, (Enrolment.course_id == Course.id)
                           & (Enrolment.user_id == user.id)).where(
            Enrolment.role == CourseRole.INSTRUCTOR)
    return list(session.scalars(query))


def taught_courses(session: Session, user: User) -> list[Course]:
    query = select(Course).order_by(Course.code)
    if user.role is not Role.ADMIN:
        query = query.join(Enrolment, (Enrolment.course_id == Course.id)
                           & (Enrolment.user_id == user.id)).where(
            Enrolment.role == CourseRole.INSTRUCTOR)
    return list(session.scalars(query))


def teaches(session: Session, user: User, course: Course) -> bool:
    return course_role(session, user, course.id) is CourseRole.INSTRUCTOR


def course_members(session: Session, course: Course) -> list[Enrolment]:
    return list(session.scalars(select(Enrolment).join(User).where(
        Enrolment.course_id == course.id).order_by(Enrolment.role, User.username)))


def best_scores(session: Session, user: User,
                assignments: Iterable[CourseAssignment]) -> dict[int, float | None]:
    """Each assignment's best score as this user may read it (the API's visibility rules)."""
    ids = [a.id for a in assignments]
    best: dict[int, float | None] = dict.fromkeys(ids)
    rows = session.scalars(select(Submission).where(
        Submission.user_id == user.id, Submission.assignment_id.in_(ids),
        Submission.status == SubmissionStatus.GRADED))
    for submission in rows:
        score = submission_json(session, submission, user)["score"]
        current = best[submission.assignment_id]
        if score is not None and (current is None or score > current):
            best[submission.assignment_id] = score
    return best


@dataclass(frozen=True)
class SubmissionFilter:
    student: str | None = None
    """A user name, or part of one / of the display name."""
    status: str | None = None
    code: str | None = None
    late: bool | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> SubmissionFilter:
        status = args.get("status") or None
        if status is not None and status not in {s.value for s in SubmissionStatus}:
            raise ServiceError(f"Unknown status {status!r}.")
        late = {"yes": True, "no": False}.get(args.get("late", ""))
        return cls(student=args.get("student") or None, status=status,
                   code=args.get("code") or None, late=late)


def filter_submissions(session: Session, assignment: CourseAssignment, wanted: SubmissionFilter,
                       *, limit: int = 200) -> list[Submission]:
    """The assignment's submissions, newest first, narrowed by the dashboard's filters."""
    query = (select(Submission).join(User).where(Submission.assignment_id == assignment.id)
             .options(selectinload(Submission.results), selectinload(Submission.user))
             .order_by(Submission.id.desc()))
    if wanted.student:
        pattern = f"%{wanted.student.lower()}%"
        query = query.where(func.lower(User.username).like(pattern)
                            | func.lower(User.display_name).like(pattern))
    if wanted.status:
        query = query.where(Submission.status == SubmissionStatus(wanted.status))
    if wanted.late is not None:
        query = query.where(Submission.late.is_(wanted.late))
    rows: Iterable[Submission] = session.scalars(query)
    if wanted.code:
        code = wanted.code
        rows = (s for s in rows if s.result is not None and code in s.result.codes)
    return list(itertools.islice(rows, limit))


@dataclass
class AssignmentStats:
    """Everything the assignment dashboard draws, as plain data (its charts' JSON)."""

    students: int
    graded_students: int
    histogram: dict[str, list[Any]]
    codes: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    timeline: dict[str, Any]
    queue: dict[str, int]
    latency: dict[str, float | None]
    deadline: str | None = None

    def charts(self) -> dict[str, Any]:
        return {"histogram": self.histogram, "codes": self.codes, "checks": self.checks,
                "timeline": self.timeline}


def assignment_stats(session: Session, assignment: CourseAssignment) -> AssignmentStats:
    # Result documents are the bulk of the data: only the latest result's per student is read.
    submissions = list(session.scalars(
        select(Submission).where(Submission.assignment_id == assignment.id)
        .options(selectinload(Submission.results).defer(Result.document))
        .order_by(Submission.requested_at)))
    latest: dict[int, Submission] = {}
    for s in submissions:
        if s.status is SubmissionStatus.GRADED and s.result is not None:
            latest[s.user_id] = s
    results = [s.result for s in latest.values() if s.result is not None]
    documents = list(session.scalars(select(Result.document)
                                     .where(Result.id.in_([r.id for r in results]))))
    return AssignmentStats(
        students=len({s.user_id for s in submissions}),
        graded_students=len(results),
        histogram=score_histogram([r.final_score for r in results], assignment.max_score),
        codes=code_frequency([r.codes for r in results]),
        checks=check_pass_rates(documents),
        timeline=submission_timeline([s.requested_at for s in submissions], assignment.due_at),
        queue=queue_counts(session, assignment),
        latency=grading_latency(submissions),
        deadline=assignment.due_at.isoformat() if assignment.due_at else None,
    )


def score_histogram(scores: list[float], max_score: float) -> dict[str, list[Any]]:
    """Counts of scores in ten equal bins of [0, max_score] (the last bin includes the max)."""
    width = (max_score or 1.0) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for score in scores:
        counts[min(int(score / width), HISTOGRAM_BINS - 1) if score > 0 else 0] += 1
    labels = [f"{i * width:g}-{(i + 1) * width:g}" for i in range(HISTOGRAM_BINS)]
    return {"labels": labels, "counts": counts}


def code_frequency(code_lists: list[list[str]]) -> list[dict[str, Any]]:
    """How many students' latest graded submission has each code, most frequent first."""
    counts = Counter(code for codes in code_lists for code in set(codes))
    total = len(code_lists) or 1
    return [{"code": code, "students": n, "share": round(n / total, 4)}
            for code, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def check_pass_rates(documents: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    passed: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    names: dict[str, str] = {}
    for document in documents:
        for test in document.get("tests", []):
            number = str(test["number"])
            names[number] = str(test["name"])
            seen[number] += 1
            passed[number] += test["status"] == "passed"
    return [{"number": n, "name": names[n], "passed": passed[n], "total": seen[n],
             "rate": round(passed[n] / seen[n], 4)}
            for n in sorted(seen, key=_check_order)]


def _check_order(number: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"[.\-]", number)]


def submission_timeline(moments: list[datetime], due_at: datetime | None) -> dict[str, Any]:
    """Submissions per hour (per day when they span more than three days), split at the due date."""
    if not moments:
        return {"labels": [], "on_time": [], "late": [], "deadline_label": None}
    span = max(moments) - min(moments)
    step = timedelta(days=1) if span > timedelta(days=3) else timedelta(hours=1)
    fmt = "%Y-%m-%d" if step == timedelta(days=1) else "%m-%d %H:00"

    def bucket(moment: datetime) -> datetime:
        if step == timedelta(days=1):
            return moment.replace(hour=0, minute=0, second=0, microsecond=0)
        return moment.replace(minute=0, second=0, microsecond=0)

    start, end = bucket(min(moments)), bucket(max(moments))
    if due_at is not None and start <= bucket(due_at) <= end + 3 * step:
        end = max(end, bucket(due_at))
    buckets: list[datetime] = []
    while start <= end and len(buckets) < 500:
        buckets.append(start)
        start += step
    index = {b: i for i, b in enumerate(buckets)}
    on_time, late = [0] * len(buckets), [0] * len(buckets)
    for moment in moments:
        i = index.get(bucket(moment))
        if i is None:
            continue
        if due_at is not None and moment > due_at:
            late[i] += 1
        else:
            on_time[i] += 1
    deadline_label = (bucket(due_at).strftime(fmt)
                      if due_at is not None and bucket(due_at) in index else None)
    return {"labels": [b.strftime(fmt) for b in buckets], "on_time": on_time, "late": late,
            "deadline_label": deadline_label}


def queue_counts(session: Session, assignment: CourseAssignment | None = None) -> dict[str, int]:
    """Submissions per status (this assignment's, or the whole service's)."""
    query = select(Submission.status, func.count()).group_by(Submission.status)
    if assignment is not None:
        query = query.where(Submission.assignment_id == assignment.id)
    counts = {s.value: 0 for s in SubmissionStatus}
    counts.update({status.value: n for status, n in session.execute(query)})
    return counts


def grading_latency(submissions: list[Submission], recent: int = 200
                    ) -> dict[str, float | None]:
    """Median and 95th percentile, in seconds, of submit-to-result and of queue wait."""
    graded = [s for s in submissions if s.graded_at is not None][-recent:]
    total = [(s.graded_at - s.requested_at).total_seconds() for s in graded
             if s.graded_at is not None]
    wait = [(s.started_at - s.requested_at).total_seconds() for s in graded
            if s.started_at is not None]
    return {"median": _percentile(total, 50), "p95": _percentile(total, 95),
            "wait_median": _percentile(wait, 50), "samples": float(len(total))}


def _percentile(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)


def regrade_progress(session: Session, ids: list[int]) -> dict[str, int]:
    """How far a regrade of these submissions has got."""
    counts = {s.value: 0 for s in SubmissionStatus}
    if ids:
        rows = session.execute(select(Submission.status, func.count()).where(
            Submission.id.in_(ids)).group_by(Submission.status))
        counts.update({status.value: n for status, n in rows})
    counts["total"] = len(ids)
    counts["done"] = counts["graded"] + counts["failed"]
    return counts


_LINE_REFS = (
    re.compile(r"\(in (?P<file>[^,()]+), line (?P<line>\d+)"),
    re.compile(r"`(?P<file>[^`]+)` line (?P<line>\d+), column"),
    re.compile(r"File \"(?:[^\"]*/)?(?P<file>[^\"/]+)\", line (?P<line>\d+)"),
)


def pointed_lines(results: Mapping[str, Any] | None, file_names: list[str],
                  entry: str) -> dict[str, dict[int, list[str]]]:
    """Lines of the student's files that diagnoses or check outputs point at, with why.

    A lone file is graded as the assignment's entry file, so references to ``entry`` land on it.
    """
    found: dict[str, dict[int, list[str]]] = {}
    if not results:
        return found
    notes: list[tuple[str, str]] = [(d["code"], d.get("message", ""))
                                    for d in results.get("diagnoses", [])]
    notes += [(f"check {t['number']}", t.get("output", "")) for t in results.get("tests", [])]
    for label, text in notes:
        for pattern in _LINE_REFS:
            for match in pattern.finditer(text or ""):
                name = _file_for(match["file"].strip(), file_names, entry)
                if name is None:
                    continue
                labels = found.setdefault(name, {}).setdefault(int(match["line"]), [])
                if label not in labels:
                    labels.append(label)
    return found


def _file_for(name: str, file_names: list[str], entry: str) -> str | None:
    if name in file_names:
        return name
    if len(file_names) == 1 and name == entry:
        return file_names[0]
    return None
