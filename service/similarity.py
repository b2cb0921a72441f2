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

``copydetect`` imports matplotlib, so it is imported only when a report is computed.
"""

from __future__ import annotations

import io
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from grader.notebook import NOTEBOOK_SUFFIX, NotebookError, read_notebook
from service.gradebook import gradebook
from service.models import CourseAssignment, SubmissionFile

K = 25
"""Tokens per fingerprinted k-gram (copydetect's default noise threshold)."""
WINDOW = 1
"""Winnowing window (1: every k-gram kept; classes are small enough)."""
FLOOR = 0.3
"""No pair sharing under 30% of its code is reported, whatever the class's distribution."""

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


def all_pairs(sources: Mapping[str, str], boilerplate: Sequence[str] = ()) -> list[Pair]:
    """Every pair of ``sources`` (student -> code) compared, boilerplate left out."""
    from copydetect import compare_files

    given: set[int] = set()
    for number, code in enumerate(boilerplate):
        given.update(_fingerprint(f"boilerplate{number}.py", code).hashes)
    prints = {name: _fingerprint(f"{name}.py", code, sorted(given))
              for name, code in sorted(sources.items())}
    names = list(prints)
    pairs: list[Pair] = []
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            _, (share1, share2), (slices1, slices2) = compare_files(prints[first],
                                                                    prints[second])
            pairs.append(Pair(first, second, min(float(share1), float(share2)),
                              (float(share1), float(share2)),
                              (_ranges(slices1), _ranges(slices2))))
    return pairs


def compare(sources: Mapping[str, str], boilerplate: Sequence[str] = ()) -> Report:
    """Every pair compared; the pairs over the class's threshold, closest first."""
    pairs = all_pairs(sources, boilerplate)
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
    from service.catalogue import public_files

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


def similarity_report(session: Session, assignment: CourseAssignment) -> Report:
    return compare(counted_sources(session, assignment), boilerplate_of(assignment))


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
    import csv

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["first", "second", "score", "share_of_first", "share_of_second",
                     "threshold"])
    for pair in report.flagged:
        writer.writerow([pair.first, pair.second, f"{pair.score:.3f}", f"{pair.shares[0]:.3f}",
                         f"{pair.shares[1]:.3f}", f"{report.threshold:.3f}"])
    return out.getvalue()
