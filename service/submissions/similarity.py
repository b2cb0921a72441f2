"""Similarity report: pairs of students whose counted submissions are unusually alike.

The comparison is ``copydetect``'s (winnowed k-gram fingerprints over pygments tokens with
names and strings abstracted, the scheme MOSS uses); the starter code, the public tests and the
statement's code blocks are boilerplate, so what everyone was given never counts. A pair's score
is the smaller of the two shares of each file found in the other (a short file inside a long
one is not a copy of it).

Short attention functions look alike, so a fixed cut-off would flag half a class: the threshold
comes from the class's own scores. Each student's closest match is taken, and Tukey's far-out
fence ``Q3 + 3 IQR`` over those (never below ``FLOOR``) is the cut: a pair is reported when it is
far closer than how close everyone's closest match is in this class.

A report compares every pair of a class, so its cost grows with the square of the class, and it
is computed in the background (``run_report``, the worker's similarity task) with its progress
recorded, and kept (``SimilarityRun``) until a student's counted submission changes.

``copydetect`` imports matplotlib, so it is imported only when a report is computed.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from grader.notebook import NOTEBOOK_SUFFIX, NotebookError, read_notebook
from service.core.db import rows_changed
from service.models import (
    CourseAssignment,
    ReportStatus,
    SimilarityRun,
    SubmissionFile,
    User,
    utcnow,
)
from service.submissions.gradebook import gradebook

log = logging.getLogger(__name__)

K = 25
"""Tokens per fingerprinted k-gram (copydetect's default noise threshold)."""
WINDOW = 1
"""Winnowing window (1: every k-gram kept; classes are small enough)."""
FLOOR = 0.3
"""No pair sharing under 30% of its code is reported, whatever the class's distribution."""

LOST_AFTER = timedelta(minutes=10)
"""A run that shows no sign of life for this long is taken as lost (its worker died)."""
PROGRESS_SECONDS = 1.0
"""How often a run records its progress."""

Progress = Callable[[int, int], None]
"""Told (pairs compared, pairs in all) as the comparison goes."""

_FENCE = re.compile(r"^```(?:python|py)\s*$(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    score: float
    shares: tuple[float, float]
    """Share of ``first``'s tokens found in ``second`` and the other way round."""
    regions: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]
    """Matching character ranges in each source, for the side-by-side view."""


@dataclass(frozen=True)
class Report:
    students: int
    compared: int
    threshold: float
    median: float
    flagged: list[Pair]


def threshold(scores: Sequence[float]) -> float:
    """The class's far-out fence (``Q3 + 3 IQR``), at least ``FLOOR``."""
    if len(scores) < 4:
        return FLOOR
    q1, _, q3 = statistics.quantiles(scores, n=4, method="inclusive")
    return max(FLOOR, q3 + 3 * (q3 - q1))


def _fingerprint(name: str, code: str, boilerplate: Sequence[int] | None = None) -> Any:
    from copydetect import CodeFingerprint

    return CodeFingerprint(name, K, WINDOW, boilerplate=list(boilerplate or ()), language="python",
                           fp=io.StringIO(code))


def all_pairs(sources: Mapping[str, str], boilerplate: Sequence[str] = (),
              progress: Progress | None = None) -> list[Pair]:
    """Every pair of ``sources`` (student -> code) compared, boilerplate left out."""
    from copydetect import compare_files

    given: set[int] = set()
    for number, code in enumerate(boilerplate):
        given.update(_fingerprint(f"boilerplate{number}.py", code).hashes)
    prints = {name: _fingerprint(f"{name}.py", code, sorted(given))
              for name, code in sorted(sources.items())}
    names = list(prints)
    total = len(names) * (len(names) - 1) // 2
    pairs: list[Pair] = []
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            _, (share1, share2), (slices1, slices2) = compare_files(prints[first],
                                                                    prints[second])
            pairs.append(Pair(first, second, min(float(share1), float(share2)),
                              (float(share1), float(share2)),
                              (_ranges(slices1), _ranges(slices2))))
            if progress is not None:
                progress(len(pairs), total)
    return pairs


def compare(sources: Mapping[str, str], boilerplate: Sequence[str] = (),
            progress: Progress | None = None) -> Report:
    """Every pair compared; the pairs over the class's threshold, closest first."""
    pairs = all_pairs(sources, boilerplate, progress)
    scores = [pair.score for pair in pairs]
    closest: dict[str, float] = {}
    for pair in pairs:
        for name in (pair.first, pair.second):
            closest[name] = max(closest.get(name, 0.0), pair.score)
    cut = threshold(list(closest.values()))
    flagged = sorted((pair for pair in pairs if pair.score >= cut),
                     key=lambda pair: -pair.score)
    return Report(len(sources), len(pairs), cut, statistics.median(scores) if scores else 0.0,
                  flagged)


def _ranges(slices: Any) -> tuple[tuple[int, int], ...]:
    if len(slices) == 0 or len(slices[0]) == 0:
        return ()
    return tuple((int(start), int(end)) for start, end in zip(slices[0], slices[1], strict=True))


def boilerplate_of(assignment: CourseAssignment) -> list[str]:
    """What every student was given: the public .py files and the statement's code blocks."""
    from service.submissions.catalogue import public_files

    given = []
    for name, path in sorted(public_files(assignment).items()):
        text = path.read_text(encoding="utf-8", errors="replace")
        if name.endswith(".py"):
            given.append(text)
        elif name.endswith(".md"):
            given.extend(block for block in _FENCE.findall(text))
    return given


def counted_sources(session: Session, assignment: CourseAssignment) -> dict[str, str]:
    """Each student's counted submission as one text (its .py files and notebook in name
    order)."""
    owners = {row.standing.counted.submission_id: row.user.username
              for row in gradebook(session, assignment) if row.standing.counted is not None}
    sources: dict[str, list[str]] = {}
    if owners:
        for submission_id, name, content in session.execute(
                select(SubmissionFile.submission_id, SubmissionFile.name,
                       SubmissionFile.content)
                .where(SubmissionFile.submission_id.in_(list(owners)))
                .order_by(SubmissionFile.submission_id, SubmissionFile.name)):
            text = source_text(name, content)
            if text is not None:
                sources.setdefault(owners[submission_id], []).append(text)
    return {user: "\n".join(parts) for user, parts in sources.items()}


def source_text(name: str, content: bytes) -> str | None:
    """The code of a submitted file: a .py file's text, a notebook's code cells one after
    the other; None for anything else."""
    if name.endswith(".py"):
        return content.decode("utf-8", errors="replace")
    if name.endswith(NOTEBOOK_SUFFIX):
        try:
            return "\n".join(cell.source for cell in read_notebook(content))
        except NotebookError:
            return None
    return None


def comparison_key(sources: Mapping[str, str], boilerplate: Sequence[str]) -> str:
    """What a report compares, as a digest: the same key, the same report."""
    digest = hashlib.sha256()
    for name, code in sorted(sources.items()):
        digest.update(b"S" + name.encode() + b"\0" + code.encode() + b"\0")
    for code in boilerplate:
        digest.update(b"B" + code.encode() + b"\0")
    return digest.hexdigest()


def report_json(report: Report) -> dict[str, Any]:
    return {"students": report.students, "compared": report.compared,
            "threshold": report.threshold, "median": report.median,
            "flagged": [{"first": p.first, "second": p.second, "score": p.score,
                         "shares": list(p.shares),
                         "regions": [[list(r) for r in side] for side in p.regions]}
                        for p in report.flagged]}


def report_from_json(body: Mapping[str, Any]) -> Report:
    def region(side: Sequence[Sequence[int]]) -> tuple[tuple[int, int], ...]:
        return tuple((int(start), int(end)) for start, end in side)

    flagged = [Pair(p["first"], p["second"], float(p["score"]),
                    (float(p["shares"][0]), float(p["shares"][1])),
                    (region(p["regions"][0]), region(p["regions"][1])))
               for p in body["flagged"]]
    return Report(int(body["students"]), int(body["compared"]), float(body["threshold"]),
                  float(body["median"]), flagged)


@dataclass(frozen=True)
class SimilarityState:
    """What the similarity page shows: the latest run, the latest report and whether that
    report compared the counted submissions as they are now."""

    run: SimilarityRun | None
    report: Report | None
    finished_at: datetime | None
    current: bool
    students: int

    @property
    def pending(self) -> bool:
        return run_pending(self.run)

    @property
    def failed(self) -> str | None:
        """Why the latest run did not finish, if it did not."""
        if self.run is None or self.pending or self.run.status is ReportStatus.DONE:
            return None
        return self.run.error or "the computation stopped without finishing"


def _alive(run: SimilarityRun) -> bool:
    return run.status in (ReportStatus.QUEUED, ReportStatus.RUNNING) and (
        run.updated_at > utcnow() - LOST_AFTER)


def latest_run(session: Session, assignment: CourseAssignment, *, done: bool = False
               ) -> SimilarityRun | None:
    """The assignment's newest run (``done``: its newest finished one)."""
    where = [SimilarityRun.assignment_id == assignment.id]
    if done:
        where.append(SimilarityRun.status == ReportStatus.DONE)
    return session.scalar(select(SimilarityRun).where(*where)
                          .order_by(SimilarityRun.id.desc()).limit(1))


def run_pending(run: SimilarityRun | None) -> bool:
    """Whether the run is still to be answered (queued or running, and not lost)."""
    return run is not None and _alive(run)


def similarity_state(session: Session, assignment: CourseAssignment) -> SimilarityState:
    sources = counted_sources(session, assignment)
    key = comparison_key(sources, boilerplate_of(assignment))
    latest = latest_run(session, assignment)
    finished = latest_run(session, assignment, done=True)
    report = report_from_json(finished.report) if finished and finished.report else None
    return SimilarityState(latest, report, finished.finished_at if finished else None,
                           finished is not None and finished.key == key, len(sources))


def request_report(session: Session, assignment: CourseAssignment, by: User | None
                   ) -> tuple[SimilarityRun, bool]:
    """The run that will answer for the counted submissions as they are now, and whether it
    is new (then send the similarity task for it once committed)."""
    key = comparison_key(counted_sources(session, assignment), boilerplate_of(assignment))
    waiting = [run for run in session.scalars(select(SimilarityRun).where(
        SimilarityRun.assignment_id == assignment.id, SimilarityRun.key == key,
        SimilarityRun.status.in_([ReportStatus.QUEUED, ReportStatus.RUNNING])))
        if _alive(run)]
    if waiting:
        return waiting[0], False
    run = SimilarityRun(assignment_id=assignment.id, requested_by_id=by.id if by else None,
                        key=key)
    session.add(run)
    session.flush()
    return run, True


def fail_run(session: Session, run_id: int, error: str) -> None:
    session.execute(update(SimilarityRun).where(SimilarityRun.id == run_id).values(
        status=ReportStatus.FAILED, error=error, finished_at=utcnow(), updated_at=utcnow()))
    session.commit()


def run_report(session: Session, run_id: int) -> str:
    """Compute one run (the similarity task's body): ``done``, ``failed`` or ``skipped``
    (another copy has it, or it is gone)."""
    now = utcnow()
    claimed = rows_changed(session, update(SimilarityRun).where(
        SimilarityRun.id == run_id, SimilarityRun.status == ReportStatus.QUEUED).values(
        status=ReportStatus.RUNNING, updated_at=now))
    session.commit()
    if claimed != 1:
        return "skipped"
    run = session.get(SimilarityRun, run_id)
    assert run is not None
    assignment = session.get(CourseAssignment, run.assignment_id)
    assert assignment is not None
    last = time.monotonic()

    def progress(done: int, total: int) -> None:
        nonlocal last
        if done < total and time.monotonic() - last < PROGRESS_SECONDS:
            return
        last = time.monotonic()
        session.execute(update(SimilarityRun).where(SimilarityRun.id == run_id).values(
            done=done, total=total, updated_at=utcnow()))
        session.commit()

    try:
        sources, given = counted_sources(session, assignment), boilerplate_of(assignment)
        report = compare(sources, given, progress)
    except Exception as exc:
        session.rollback()
        log.exception("similarity run %s failed", run_id)
        fail_run(session, run_id, f"the comparison failed ({type(exc).__name__})")
        return "failed"
    pairs = report.compared
    session.execute(update(SimilarityRun).where(SimilarityRun.id == run_id).values(
        status=ReportStatus.DONE, key=comparison_key(sources, given), done=pairs, total=pairs,
        report=report_json(report), finished_at=utcnow(), updated_at=utcnow()))
    session.commit()
    return "done"


def pair_view(session: Session, assignment: CourseAssignment, first: str, second: str
              ) -> tuple[Pair, list[list[tuple[str, bool]]]] | None:
    """Two students' counted code compared, each cut into (text, matching) segments for the
    side-by-side view (None: one of them has no counted submission)."""
    sources = counted_sources(session, assignment)
    if first not in sources or second not in sources or first == second:
        return None
    pair = all_pairs({first: sources[first], second: sources[second]},
                     boilerplate_of(assignment))[0]
    return pair, [segments(sources[pair.first], pair.regions[0]),
                  segments(sources[pair.second], pair.regions[1])]


def segments(code: str, ranges: Sequence[tuple[int, int]]) -> list[tuple[str, bool]]:
    """``code`` cut into runs (text, inside some matching range), in order; ranges may
    overlap or reach past the end."""
    marked = [False] * len(code)
    for start, end in ranges:
        for index in range(max(start, 0), min(end, len(code))):
            marked[index] = True
    out: list[tuple[str, bool]] = []
    at = 0
    for index in range(1, len(code) + 1):
        if index == len(code) or marked[index] != marked[at]:
            out.append((code[at:index], marked[at]))
            at = index
    return out


def report_csv(report: Report) -> str:
    """The flagged pairs as CSV, closest first, with the threshold they passed."""
    from service.core.visible import CSVWriter

    out = io.StringIO()
    writer = CSVWriter(out)
    writer.writerow(["first", "second", "score", "share_of_first", "share_of_second",
                     "threshold"])
    for pair in report.flagged:
        writer.writerow([pair.first, pair.second, f"{pair.score:.3f}", f"{pair.shares[0]:.3f}",
                         f"{pair.shares[1]:.3f}", f"{report.threshold:.3f}"])
    return out.getvalue()
