"""What the web pages need beyond the API's service functions: dashboard statistics and filters."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from grader.notebook import CELL_REF
from service.core.errors import ServiceError
from service.core.pagination import PER_PAGE, Page, paginate
from service.courses.enrolment import course_role
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
from service.submissions.gradebook import Scored, counted_score, scored_submissions, standings
from service.submissions.instructor import load_submissions
from service.submissions.submitting import submission_json

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


def course_members(session: Session, course: Course, *, number: int = 1,
                   per_page: int = PER_PAGE) -> Page[Enrolment]:
    """A page of the course's members, instructors first, by user name."""
    total = session.scalar(select(func.count()).select_from(Enrolment).where(
        Enrolment.course_id == course.id)) or 0
    rows = list(session.scalars(
        select(Enrolment).join(User).where(Enrolment.course_id == course.id)
        .order_by(Enrolment.role, User.username).limit(per_page)
        .offset((number - 1) * per_page)
        .options(selectinload(Enrolment.user).selectinload(User.tokens))))
    return Page(rows, int(total), number, per_page)


def counted_scores(session: Session, user: User,
                   assignments: Iterable[CourseAssignment]) -> dict[int, float | None]:
    """Each assignment's counted score as this user may read it now (None while any check of
    the counted submission is held back, as on the submission page)."""
    scores: dict[int, float | None] = {}
    for assignment in assignments:
        counted = counted_score(session, user.id, assignment)
        if counted is None or counted.result_id is None:
            scores[assignment.id] = None
            continue
        submission = session.get(Submission, counted.submission_id)
        assert submission is not None
        scores[assignment.id] = submission_json(session, submission, user,
                                                scored=counted)["score"]
    return scores


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


@dataclass(frozen=True)
class SubmissionRows:
    """A page of the filtered submissions with their scores, and the codes to filter by."""

    page: Page[Submission]
    scores: dict[int, Scored]
    codes: list[str]


def filter_submissions(session: Session, assignment: CourseAssignment, wanted: SubmissionFilter,
                       *, number: int = 1, per_page: int = PER_PAGE) -> SubmissionRows:
    """The assignment's submissions, newest first, narrowed by the dashboard's filters (late
    and codes as they stand now: derived, so they follow deadlines and regrades)."""
    everything = scored_submissions(session, assignment)
    codes = sorted({code for s in everything for code in s.codes})
    rows = everything
    if wanted.student:
        pattern = f"%{wanted.student.lower()}%"
        users = set(session.scalars(select(User.id).where(
            func.lower(User.username).like(pattern)
            | func.lower(User.display_name).like(pattern))))
        rows = [s for s in rows if s.user_id in users]
    if wanted.status:
        rows = [s for s in rows if s.status.value == wanted.status]
    if wanted.late is not None:
        rows = [s for s in rows if s.late is wanted.late]
    if wanted.code:
        rows = [s for s in rows if wanted.code in s.codes]
    rows = sorted(rows, key=lambda s: s.submission_id, reverse=True)
    ids = paginate(rows, number, per_page)
    page = Page(load_submissions(session, [s.submission_id for s in ids.items]), ids.total,
                ids.number, ids.per_page)
    return SubmissionRows(page, {s.submission_id: s for s in ids.items}, codes)


@dataclass
class AssignmentStats:
    """Everything the assignment dashboard draws, as plain data (its charts' JSON)."""

    students: int
    graded_students: int
    histogram: dict[str, Any]
    codes: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    timeline: dict[str, Any]
    queue: dict[str, int]
    latency: dict[str, float | None]
    deadline: str | None = None
    enrolled: int = 0
    extensions: int = 0

    stuck: list[dict[str, Any]] | None = None
    """Students whose last three graded submissions share a code: ``{"code", "students"}``."""

    def charts(self) -> dict[str, Any]:
        return {"histogram": self.histogram, "codes": self.codes, "checks": self.checks,
                "timeline": self.timeline}


def assignment_stats(session: Session, assignment: CourseAssignment, *,
                     checks: bool = True) -> AssignmentStats:
    """The figures of each enrolled student's counted submission: during a regrade these are
    the results in force (the previous round's until the new one is stored). ``checks``
    False leaves out the pass rate per check (the one figure that reads result documents)."""
    everything = scored_submissions(session, assignment)
    table = standings(session, assignment, everything=everything)
    counted = [s.counted for s in table.values() if s.counted is not None]
    # Result documents are the bulk of the data: only the counted results' are read.
    documents = list(session.scalars(select(Result.document).where(
        Result.id.in_([c.result_id for c in counted if c.result_id is not None])))) \
        if checks else []
    return AssignmentStats(
        students=sum(1 for s in table.values() if s.submissions),
        graded_students=len(counted),
        histogram=score_histogram([c.final for c in counted if c.final is not None],
                                  assignment.max_score),
        codes=code_frequency([list(c.codes) for c in counted]),
        checks=check_pass_rates(documents),
        timeline=submission_timeline([s.submitted_at for s in everything], assignment.due_at,
                                     late=[s.late for s in everything]),
        queue=queue_counts(session, assignment),
        latency=grading_latency(session, assignment),
        deadline=assignment.due_at.isoformat() if assignment.due_at else None,
        enrolled=len(table),
        extensions=sum(1 for s in table.values() if s.deadline.extended),
        stuck=_stuck(session, everything),
    )


STUCK_AFTER = 3


def stuck_students(submissions: Iterable[Scored]) -> dict[str, list[int]]:
    """By code, the students whose last ``STUCK_AFTER`` graded submissions all carry it."""
    graded: dict[int, list[Scored]] = {}
    for submission in submissions:  # oldest first
        if submission.result_id is not None:
            graded.setdefault(submission.user_id, []).append(submission)
    stuck: dict[str, list[int]] = {}
    for user_id, own in graded.items():
        last = own[-STUCK_AFTER:]
        if len(last) < STUCK_AFTER:
            continue
        for code in sorted(set.intersection(*(set(s.codes) for s in last))):
            stuck.setdefault(code, []).append(user_id)
    return stuck


def _stuck(session: Session, submissions: list[Scored]) -> list[dict[str, Any]]:
    by_code = stuck_students(submissions)
    ids = {user_id for users in by_code.values() for user_id in users}
    names = dict(session.execute(select(User.id, User.username).where(User.id.in_(ids))).all()) \
        if ids else {}
    return [{"code": code, "students": sorted(names.get(u, str(u)) for u in users)}
            for code, users in sorted(by_code.items(), key=lambda item: (-len(item[1]), item[0]))]


def score_histogram(scores: list[float], max_score: float) -> dict[str, Any]:
    """Counts of scores in ten equal bins of [0, max_score] (the last bin includes the max)."""
    width = (max_score or 1.0) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for score in scores:
        counts[min(int(score / width), HISTOGRAM_BINS - 1) if score > 0 else 0] += 1
    labels = [f"{i * width:g}-{(i + 1) * width:g}" for i in range(HISTOGRAM_BINS)]
    return {"labels": labels, "counts": counts, "max_score": max_score, "count": len(scores),
            "mean": round(statistics.fmean(scores), 2) if scores else None,
            "median": round(statistics.median(scores), 2) if scores else None,
            "zeros": sum(1 for score in scores if score <= 0)}


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
    points: dict[str, float] = {}
    for document in documents:
        for test in document.get("tests", []):
            number = str(test["number"])
            names[number] = str(test["name"])
            points[number] = float(test.get("max_score") or 0)
            seen[number] += 1
            passed[number] += test["status"] == "passed"
    return [{"number": n, "name": names[n], "passed": passed[n], "total": seen[n],
             "rate": round(passed[n] / seen[n], 4), "points": points[n]}
            for n in sorted(seen, key=_check_order)]


def _check_order(number: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"[.\-]", number)]


TIMELINE_STEPS = tuple(timedelta(minutes=m) for m in (1, 5, 10, 15, 30, 60, 180, 360, 720,
                                                      1440, 10080))
TIMELINE_MAX_BINS = 36
_EPOCH = datetime(2000, 1, 3)  # a Monday: week bins start on Mondays


def timeline_step(span: timedelta) -> timedelta:
    """The smallest bin from a readable ladder (minutes for a lab, days for a month) that
    covers ``span`` in at most ``TIMELINE_MAX_BINS`` bins."""
    for step in TIMELINE_STEPS:
        if span < step * TIMELINE_MAX_BINS:
            return step
    return TIMELINE_STEPS[-1]


def submission_timeline(moments: list[datetime], due_at: datetime | None, *,
                        late: list[bool] | None = None) -> dict[str, Any]:
    """Submissions per bin, on time or late, the bin fitting the span (``timeline_step``):
    ``late`` says which were (against each student's own deadline); by default, those after
    the due date. The deadline's bin is named when it falls in the chart."""
    if not moments:
        return {"labels": [], "on_time": [], "late": [], "deadline_label": None,
                "step_minutes": None}
    low, high = min(moments), max(moments)
    if due_at is not None and low <= due_at <= high + (high - low) / 4:
        high = max(high, due_at)
    step = timeline_step(high - low)
    fmt = "%Y-%m-%d" if step >= timedelta(days=1) else "%m-%d %H:%M"
    zone = low.tzinfo
    epoch = _EPOCH.replace(tzinfo=zone)

    def bucket(moment: datetime) -> datetime:
        return epoch + step * ((moment.astimezone(zone) - epoch) // step) if zone else \
            epoch + step * ((moment - epoch) // step)

    start, end = bucket(low), bucket(high)
    buckets: list[datetime] = []
    while start <= end and len(buckets) < 500:
        buckets.append(start)
        start += step
    index = {b: i for i, b in enumerate(buckets)}
    flags = late if late is not None else [due_at is not None and m > due_at for m in moments]
    on_time, late_counts = [0] * len(buckets), [0] * len(buckets)
    for moment, is_late in zip(moments, flags, strict=True):
        i = index.get(bucket(moment))
        if i is None:
            continue
        if is_late:
            late_counts[i] += 1
        else:
            on_time[i] += 1
    deadline_label = (bucket(due_at).strftime(fmt)
                      if due_at is not None and bucket(due_at) in index else None)
    return {"labels": [b.strftime(fmt) for b in buckets], "on_time": on_time, "late": late_counts,
            "deadline_label": deadline_label, "step_minutes": int(step.total_seconds() // 60)}


def queue_counts(session: Session, assignment: CourseAssignment | None = None) -> dict[str, int]:
    """Submissions per status (this assignment's, or the whole service's)."""
    query = select(Submission.status, func.count()).group_by(Submission.status)
    if assignment is not None:
        query = query.where(Submission.assignment_id == assignment.id)
    counts = {s.value: 0 for s in SubmissionStatus}
    counts.update({status.value: n for status, n in session.execute(query)})
    return counts


def grading_latency(session: Session, assignment: CourseAssignment, recent: int = 200
                    ) -> dict[str, float | None]:
    """Median and 95th percentile, in seconds, of submit-to-result and of queue wait, over the
    most recent first gradings (a regrade is not a student waiting: it is left out)."""
    rows = session.execute(select(Submission.requested_at, Submission.started_at,
                                  Submission.graded_at)
                           .where(Submission.assignment_id == assignment.id,
                                  Submission.round == 1, Submission.graded_at.is_not(None))
                           .order_by(Submission.requested_at.desc()).limit(recent)).all()
    total = [(graded - requested).total_seconds() for requested, _, graded in rows
             if graded is not None]
    wait = [(started - requested).total_seconds() for requested, started, _ in rows
            if started is not None]
    return {"median": _percentile(total, 50), "p95": _percentile(total, 95),
            "wait_median": _percentile(wait, 50), "samples": float(len(total))}


def _percentile(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)


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
    for label, text in _notes(results):
        for pattern in _LINE_REFS:
            for match in pattern.finditer(text or ""):
                name = _file_for(match["file"].strip(), file_names, entry)
                if name is None:
                    continue
                labels = found.setdefault(name, {}).setdefault(int(match["line"]), [])
                if label not in labels:
                    labels.append(label)
    return found


def pointed_cells(results: Mapping[str, Any] | None) -> dict[int, dict[int, list[str]]]:
    """Lines of a notebook's cells that diagnoses or check outputs point at (``cell 4, line 7``),
    with why: cell -> line -> labels."""
    found: dict[int, dict[int, list[str]]] = {}
    for label, text in _notes(results):
        for match in CELL_REF.finditer(text or ""):
            labels = found.setdefault(int(match["cell"]), {}).setdefault(int(match["line"]), [])
            if label not in labels:
                labels.append(label)
    return found


def _notes(results: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """What the document says, each with its label: diagnoses by code, check outputs by number."""
    if not results:
        return []
    notes: list[tuple[str, str]] = [(d["code"], d.get("message", ""))
                                    for d in results.get("diagnoses", [])]
    notes += [(f"check {t['number']}", t.get("output", "")) for t in results.get("tests", [])]
    return notes


def _file_for(name: str, file_names: list[str], entry: str) -> str | None:
    if name in file_names:
        return name
    if len(file_names) == 1 and name == entry:
        return file_names[0]
    return None
