"""Visibility in words: a diagnosis resting only on held-back checks is held back with them, and a
shown diagnosis cites only the evidence of the checks shown. For every visibility."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assignments import Assignment, CheckSpec, Visibility
from devkit.judged import judged_document
from grader.checks import CheckVerdict
from grader.feedback import NEUTRAL, with_fallback
from grader.loader import load_assignment
from service.submissions.visibility import student_view

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BEFORE_DUE = {"now": NOW, "due_at": NOW + timedelta(days=1), "results_published": False}
AFTER_DUE = {"now": NOW, "due_at": NOW - timedelta(days=1), "results_published": False}
PUBLISHED = {"now": NOW, "due_at": NOW + timedelta(days=1), "results_published": True}
HELD_BACK = [v for v in Visibility if v is not Visibility.VISIBLE]


def _with_visibility(assignment: Assignment, numbers: set[str],
                     visibility: Visibility) -> Assignment:
    checks = tuple(dataclasses.replace(c, visibility=visibility) if c.number in numbers
                   else dataclasses.replace(c, visibility=Visibility.VISIBLE)
                   for c in assignment.checks)
    return dataclasses.replace(assignment, checks=checks)


def _document(assignment: Assignment, mistakes: set[str], seed: int = 5) -> dict[str, Any]:
    return judged_document(assignment, mistakes, seed)


def _released(visibility: Visibility, moment: dict[str, Any]) -> bool:
    if visibility is Visibility.AFTER_DUE_DATE:
        return moment is not BEFORE_DUE
    return moment is PUBLISHED


@pytest.fixture(scope="module")
def attention() -> Assignment:
    return load_assignment("attention")


@pytest.mark.parametrize("visibility", HELD_BACK, ids=lambda v: v.value)
@pytest.mark.parametrize("moment", [BEFORE_DUE, AFTER_DUE, PUBLISHED],
                         ids=["before-due", "after-due", "published"])
def test_a_diagnosis_resting_only_on_held_back_checks_is_held_back_with_them(
        attention: Assignment, visibility: Visibility, moment: dict[str, Any]) -> None:
    # A custom autograd Function with a wrong backward fails only "gradients match" (1.9) and,
    # its gradients being wrong, the training check (1.11).
    assignment = _with_visibility(attention, {"1.9", "1.11"}, visibility)
    document = _document(assignment, {"gradient-wrong"})
    assert [d["code"] for d in document["diagnoses"]] == ["gradient-wrong"]
    view = student_view(document, **moment)
    shown = _released(visibility, moment)
    assert [d["code"] for d in view["diagnoses"]] == (["gradient-wrong"] if shown else [])
    text = json.dumps(view)
    assert ("gradient-wrong" in text) == shown  # not in a tag or the summary
    assert ("gradcheck" in text) == shown  # nor in a hint
    assert "views" not in text
    assert [t["tests"] for t in view["training"]] == ([["1.11"]] if shown else [])  # its curve


@pytest.mark.parametrize("visibility", HELD_BACK, ids=lambda v: v.value)
def test_a_shown_diagnosis_cites_only_the_evidence_of_shown_checks(
        attention: Assignment, visibility: Visibility) -> None:
    # softmax(dim=2) goes wrong on 4-D inputs: first seen on the all-True "heads" call (checks
    # 1.1 and 1.2), also on the per-batch mixed mask (1.3). Only 1.3 is shown at first.
    assignment = _with_visibility(attention, {"1.1", "1.2"}, visibility)
    document = _document(assignment, {"softmax-dim-2"})
    full = next(d for d in document["diagnoses"] if d["code"] == "softmax-wrong-axis")
    assert "all-True" in full["message"]
    before = student_view(document, **BEFORE_DUE)
    shown = next(d for d in before["diagnoses"] if d["code"] == "softmax-wrong-axis")
    assert shown["tests"] == ["1.3"]
    assert "all-True" not in shown["message"] and "per-batch mixed" in shown["message"]
    published = student_view(document, **PUBLISHED)
    told = next(d for d in published["diagnoses"] if d["code"] == "softmax-wrong-axis")
    assert told["message"] == full["message"] and set(told["tests"]) == {"1.1", "1.2", "1.3"}


@pytest.mark.parametrize("visibility", HELD_BACK, ids=lambda v: v.value)
def test_the_wrong_output_fallback_names_only_checks_a_student_may_see(
        visibility: Visibility) -> None:
    checks = [(CheckSpec("2", "held back", "matches-reference", ("b",), 1.0, visibility),
               CheckVerdict(False, ("b",), "On call b: the secret differs.")),
              (CheckSpec("1", "shown", "matches-reference", ("a",), 1.0),
               CheckVerdict(False, ("a",), "On call a: the output differs."))]
    [fallback] = with_fallback([], checks, NEUTRAL)
    assert fallback.tests == ("2", "1") and "secret" in fallback.message
    document = {"tests": [
        {"number": "1", "visibility": "visible", "score": 0.0, "max_score": 1.0,
         "status": "failed"},
        {"number": "2", "visibility": visibility.value, "score": 0.0, "max_score": 1.0,
         "status": "failed"}],
        "diagnoses": [fallback.to_json()], "execution_time": 0.1, "score": 0.0, "max_score": 2.0}
    before = student_view(document, **BEFORE_DUE)
    assert [d["tests"] for d in before["diagnoses"]] == [["1"]]
    assert "secret" not in json.dumps(before)
    assert "the output differs" in before["diagnoses"][0]["message"]
    [only_held_back] = with_fallback([], checks[:1], NEUTRAL)
    document["diagnoses"] = [only_held_back.to_json()]
    assert student_view(document, **BEFORE_DUE)["diagnoses"] == []
    assert [d["tests"] for d in student_view(document, **PUBLISHED)["diagnoses"]] == [["2"]]
