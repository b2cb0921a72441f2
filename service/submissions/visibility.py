"""What a student may read of a results document (Gradescope's visibility semantics). Pure.

``visible`` checks are always shown; ``after_due_date`` ones once the due date has passed;
``after_published`` and ``hidden`` ones once the instructor publishes results. Until then an
unreleased check reveals nothing: not its name, score, output, tags or training curve, no
diagnosis that only it supports, and the summary never says "all checks passed" while one is
held back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from assignments.spec import AssignmentError, load_spec
from grader.feedback import NEUTRAL

_STUDENT_META = ("assignment", "assignment_version", "seed", "backend", "termination",
                 "stdout", "stderr", "output_truncated", "notebook")


def released(visibility: str, *, now: datetime, due_at: datetime | None,
             results_published: bool) -> bool:
    if visibility == "visible":
        return True
    if visibility == "after_due_date":
        return results_published or (due_at is not None and now >= due_at)
    return results_published


def student_view(document: Mapping[str, Any], *, now: datetime, due_at: datetime | None,
                 results_published: bool) -> dict[str, Any]:
    """The document as its student may read it now."""
    shown = [t for t in document["tests"] if released(
        t["visibility"], now=now, due_at=due_at, results_published=results_published)]
    numbers = {t["number"] for t in shown}
    withheld = len(document["tests"]) - len(shown)
    tier = _tier(now=now, due_at=due_at, results_published=results_published)
    diagnoses = []
    for diagnosis in document["diagnoses"]:
        told = _as_told(diagnosis, tier)
        if told is None:
            continue
        tests = [n for n in told["tests"] if n in numbers]
        if tests or not diagnosis["tests"]:
            diagnoses.append(_without_unreleased_map({**told, "tests": tests}))
    score = round(sum(t["score"] for t in shown), 4)
    # The maximum is the assignment's, whatever is shown: a student never reads 7.5 / 9.5 where
    # the statement says 10 (the points held back are said in the summary).
    max_score = float(document["max_score"])
    shown_max = round(sum(t["max_score"] for t in shown), 4)
    meta = document.get("autograde", {})
    return {
        "score": score,
        "max_score": max_score,
        "shown_max_score": shown_max,
        "execution_time": document["execution_time"],
        "output": _summary(score, max_score, shown, diagnoses, withheld,
                           round(max_score - shown_max, 4), str(meta.get("assignment", ""))),
        "tests": shown,
        "diagnoses": diagnoses,
        "training": _released_training(document.get("training"), numbers),
        "withheld_checks": withheld,
        "autograde": {key: meta[key] for key in _STUDENT_META if key in meta},
    }


def _tier(*, now: datetime, due_at: datetime | None, results_published: bool) -> str | None:
    """Which release tier of feedback.RELEASE_TIERS a student is in; None: everything."""
    released_levels = {level for level in ("after_due_date", "hidden") if released(
        level, now=now, due_at=due_at, results_published=results_published)}
    if "hidden" in released_levels:
        return None
    return "after_due_date" if "after_due_date" in released_levels else "visible"


def _as_told(diagnosis: Mapping[str, Any], tier: str | None) -> dict[str, Any] | None:
    """The diagnosis as the tier may read it (message and tests of its released evidence only),
    or None when it rests only on checks still held back."""
    told = {key: value for key, value in diagnosis.items() if key != "views"}
    views = diagnosis.get("views")
    if tier is None or not isinstance(views, Mapping) or tier not in views:
        return told
    view = views[tier]
    if not isinstance(view, Mapping):
        return None
    return {**told, "message": view.get("message", ""), "tests": list(view.get("tests", []))}


def _without_unreleased_map(diagnosis: dict[str, Any]) -> dict[str, Any]:
    """An attention map is drawn only when a check it belongs to is released to the student
    and still cited by the diagnosis as told (its call's inputs and weights are evidence)."""
    picture = diagnosis.get("attention_map")
    if picture is None:
        return diagnosis
    tests = picture.get("tests", []) if isinstance(picture, Mapping) else []
    if isinstance(tests, list) and set(tests) & set(diagnosis["tests"]):
        return diagnosis
    return {key: value for key, value in diagnosis.items() if key != "attention_map"}


def _released_training(section: Any, numbers: set[str]) -> list[dict[str, Any]]:
    """The training curves of the checks released to the student (the curves, the accuracy
    and whether it passed are that check's evidence), citing only those checks."""
    if not isinstance(section, list):
        return []
    shown = []
    for entry in section:
        tests = entry.get("tests") if isinstance(entry, Mapping) else None
        if isinstance(tests, list) and (cited := [n for n in tests if n in numbers]):
            shown.append({**entry, "tests": cited})
    return shown


def _summary(score: float, max_score: float, shown: list[dict[str, Any]],
             diagnoses: list[dict[str, Any]], withheld: int, held_points: float,
             slug: str) -> str:
    failed = sum(1 for t in shown if t["status"] == "failed")
    lines = [f"Score {score:g}/{max_score:g}" + (" on the checks shown so far." if withheld
                                                 else ".")]
    if failed:
        lines.append(f"{failed} of {len(shown)} checks shown failed.")
    elif withheld:
        lines.append(f"All {len(shown)} checks shown passed.")
    else:
        lines.append("All checks passed.")
    if withheld:
        lines.append(f"{withheld} more check{'s are' if withheld > 1 else ' is'} "
                     f"({held_points:g} point{'s' if held_points != 1 else ''}) graded but "
                     "shown only after release.")
    for diagnosis in diagnoses:
        title = diagnosis.get("title") or _title_of(slug, diagnosis["code"])
        lines.append(f"[{diagnosis['code']}] {title}".rstrip())
    return "\n".join(lines)


def _title_of(slug: str, code: str) -> str:
    """The title of a code in a document stored before diagnoses carried their titles: the
    grader's for a lab-neutral code, else the assignment's as declared now; empty when the
    assignment or the code is gone."""
    if code in NEUTRAL:
        return NEUTRAL[code].title
    try:
        declared = load_spec(slug).codes.get(code)
    except AssignmentError:
        return ""
    return declared.text.title if declared is not None and declared.text is not None else ""
