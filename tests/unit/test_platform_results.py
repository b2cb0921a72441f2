"""The results files of exported graders (grader/platforms.py): valid against schemas written from
each platform's documentation, the same score and codes as the results document, and nothing a
held-back check supports shown before its time."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignments import Assignment, Visibility
from devkit.judged import judged_document
from grader.document import RunFacts, unrunnable_document
from grader.loader import load_assignment
from grader.platforms import (
    HELD_BACK,
    fit,
    gradescope_failure,
    gradescope_results,
    prairielearn_failure,
    prairielearn_results,
    size_of,
    told,
)

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
GRADESCOPE = json.loads((SCHEMAS / "gradescope-results.schema.json").read_text())
PRAIRIELEARN = json.loads((SCHEMAS / "prairielearn-results.schema.json").read_text())
# One mistake per kind of evidence: outputs with an attention map, gradients only (whose
# check 1.9 is shown after the due date), a property check, and two at once.
MISTAKES = [set(), {"softmax-wrong-axis"}, {"mask-inverted"}, {"gradient-wrong"},
            {"input-mutated"}, {"missing-scale", "mask-fill-zero"}]


@pytest.fixture(scope="module")
def attention() -> Assignment:
    return load_assignment("attention")


@pytest.fixture(scope="module")
def attention_held(attention: Assignment) -> Assignment:
    """The lab with its learns check (1.11) also shown only after the due date, beside 1.9:
    the gradient mistakes' evidence is then all held back."""
    checks = tuple(dataclasses.replace(c, visibility=Visibility.AFTER_DUE_DATE)
                   if c.number == "1.11" else c for c in attention.checks)
    return dataclasses.replace(attention, checks=checks)


def _document(assignment: Assignment, mistakes: set[str], seed: int = 3) -> dict[str, Any]:
    return judged_document(assignment, mistakes, seed)


def _held_back_codes(document: dict[str, Any]) -> set[str]:
    """Codes whose every piece of evidence is in checks not shown before the due date."""
    return {d["code"] for d in document["diagnoses"]
            if d.get("views", {}).get("visible", "shown") is None}


@pytest.mark.parametrize("mistakes", MISTAKES, ids=lambda m: "+".join(sorted(m)) or "correct")
def test_results_carry_the_diagnosis_in_each_platform_s_terms(
        attention: Assignment, mistakes: set[str]) -> None:
    document = _document(attention, mistakes)
    codes = {d["code"] for d in document["diagnoses"]}
    gradescope = gradescope_results(document)
    jsonschema.validate(gradescope, GRADESCOPE)
    assert gradescope["score"] == document["score"]
    assert [t["number"] for t in gradescope["tests"]] == [t["number"] for t in document["tests"]]
    assert {tag for t in gradescope["tests"] for tag in t["tags"]} <= codes
    for ours, theirs in zip(document["tests"], gradescope["tests"], strict=True):
        assert theirs["visibility"] == ("after_published" if ours["visibility"] == "hidden"
                                        else ours["visibility"])
        assert (theirs["score"], theirs["max_score"]) == (ours["score"], ours["max_score"])
    for diagnosis in document["diagnoses"]:  # each told, with its hint, on a check it rests on
        assert any(diagnosis["hint"] in t["output"] for t in gradescope["tests"])

    prairielearn = prairielearn_results(document)
    jsonschema.validate(prairielearn, PRAIRIELEARN)
    assert prairielearn["score"] == pytest.approx(document["score"] / document["max_score"])
    assert sum(t["points"] for t in prairielearn["tests"]) == pytest.approx(document["score"])
    if mistakes:
        assert codes, "a known mistake is diagnosed"
    else:
        assert prairielearn["score"] == 1.0 and not codes


@pytest.mark.parametrize("mistakes", MISTAKES[1:], ids=lambda m: "+".join(sorted(m)))
def test_held_back_evidence_is_not_shown_before_its_time(attention_held: Assignment,
                                                         mistakes: set[str]) -> None:
    document = _document(attention_held, mistakes)
    held = _held_back_codes(document)
    held_numbers = {t["number"] for t in document["tests"] if t["visibility"] != "visible"}
    gradescope = gradescope_results(document)
    shown_now = [gradescope["output"], *(t["output"] for t in gradescope["tests"]
                                         if t["visibility"] == "visible")]
    prairielearn = json.dumps(prairielearn_results(document))
    for code in held:
        assert not any(code in text for text in shown_now)
        assert code not in prairielearn
    for test in document["tests"]:
        if test["number"] in held_numbers:
            assert test["name"] not in prairielearn
    assert f"{HELD_BACK} 1.9" in prairielearn


def test_gradients_only_mistake_is_told_on_its_after_due_date_checks(
        attention_held: Assignment) -> None:
    document = _document(attention_held, {"gradient-wrong"})
    assert _held_back_codes(document) == {"gradient-wrong"}
    results = gradescope_results(document)
    for number in ("1.9", "1.11"):
        check = next(t for t in results["tests"] if t["number"] == number)
        assert check["visibility"] == "after_due_date" and check["tags"] == ["gradient-wrong"]
    assert "No mistake found in the checks shown now." in results["output"]


def test_a_check_shown_now_carries_only_the_words_it_supports(attention: Assignment) -> None:
    document = _document(attention, {"gradient-wrong"})  # 1.9 after the due date, 1.11 now
    [diagnosis] = document["diagnoses"]
    visible = diagnosis["views"]["visible"]["message"]
    assert visible != diagnosis["message"]
    tests = {t["number"]: t for t in gradescope_results(document)["tests"]}
    assert visible in tests["1.11"]["output"]
    assert diagnosis["message"] not in tests["1.11"]["output"]
    assert diagnosis["message"] in tests["1.9"]["output"]


def test_a_submission_that_cannot_run_gets_a_complete_valid_result(
        attention: Assignment) -> None:
    facts = RunFacts(seed=0, backend="test", termination="not-run")
    document = unrunnable_document(attention, "syntax-error",
                                   "`attention.py` line 3: invalid syntax", facts, 0.0)
    gradescope = gradescope_results(document)
    jsonschema.validate(gradescope, GRADESCOPE)
    assert gradescope["score"] == 0 and all(t["status"] == "failed" for t in gradescope["tests"])
    assert "line 3: invalid syntax" in gradescope["tests"][0]["output"]
    prairielearn = prairielearn_results(document)
    jsonschema.validate(prairielearn, PRAIRIELEARN)
    assert prairielearn["gradable"] and prairielearn["score"] == 0
    assert "syntax-error" in prairielearn["message"]


def test_a_failure_of_the_grader_is_not_a_grade() -> None:
    jsonschema.validate(gradescope_failure("RuntimeError: boom"), GRADESCOPE)
    failed = prairielearn_failure("RuntimeError: boom")
    jsonschema.validate(failed, PRAIRIELEARN)
    assert failed["gradable"] is False and failed["format_errors"] == ["RuntimeError: boom"]


@settings(max_examples=40, deadline=None)
@given(outputs=st.lists(st.text(min_size=0, max_size=40_000), min_size=1, max_size=40),
       images=st.integers(0, 30), limit=st.integers(20_000, 300_000))
def test_results_too_large_are_cut_visibly_to_the_limit(outputs: list[str], images: int,
                                                        limit: int) -> None:
    results = {
        "gradable": True, "score": 0.5, "message": "m", "output": "".join(outputs),
        "images": [{"label": "map", "url": "data:image/svg+xml;base64," + "A" * 5000}] * images,
        "tests": [{"name": f"check {i}", "description": "", "points": 1.0, "max_points": 2.0,
                   "message": "", "output": text} for i, text in enumerate(outputs)],
    }
    fitted = fit(results, limit)
    assert size_of(fitted) <= limit
    jsonschema.validate(fitted, PRAIRIELEARN)
    assert [(t["name"], t["points"]) for t in fitted["tests"]] == \
        [(t["name"], t["points"]) for t in results["tests"]]
    if fitted != results:
        assert "PrairieLearn keeps at most 1 MB" in json.dumps(fitted) or (
            "images were left out" in fitted["message"])


def test_an_attention_map_is_drawn_once_and_only_beside_its_released_checks(
        attention: Assignment) -> None:
    document = _document(attention, {"mask-inverted"})
    [diagnosis] = document["diagnoses"]
    assert diagnosis.get("attention_map")
    outputs = [t["output"] for t in gradescope_results(document)["tests"]]
    assert sum("Attention weights on" in output for output in outputs) == 1
    assert len(prairielearn_results(document)["images"]) == 2  # yours, expected

    held = {**diagnosis, "attention_map": {**diagnosis["attention_map"], "tests": ["1.9"]},
            "views": {"visible": {"message": "told now", "tests": diagnosis["tests"][:1]}}}
    assert "attention_map" not in (told(held, "visible") or {})
    assert "attention_map" in (told(held, None) or {})
    later = {**document, "diagnoses": [held]}
    assert prairielearn_results(later)["images"] == []


def test_the_learns_check_carries_its_training_curves(attention: Assignment) -> None:
    document = _document(attention, {"gradient-wrong"})  # it learns only part of the task
    [entry] = document["training"]
    number = entry["tests"][0]
    check = next(t for t in gradescope_results(document)["tests"] if t["number"] == number)
    assert "learned only part of the task" in check["output"]
    images = prairielearn_results(document)["images"]
    assert any(image["label"].startswith(f"Training loss of check {number}") for image in images)
