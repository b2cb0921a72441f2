"""The student sees the curve: the results document's ``training`` section (bounded, JSON-safe,
following its check's visibility), the sentence and the CLI line that say what it shows, and the
page's figure."""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import Any

import pytest

from assignments import CheckSpec, Visibility
from grader.checks import CheckVerdict
from grader.document import MAX_CURVE_POINTS, RunFacts, build_document
from grader.in_process import run_in_process
from grader.learning import TrainingEvidence
from grader.loader import load_assignment
from grader.pipeline import judge_outcomes, use_one_thread
from grader.report import render_report
from grader.training_curves import TrainingCurves, read_entry, read_section
from service.submissions.visibility import student_view
from service.web.figures import training_figures

SVG = "{http://www.w3.org/2000/svg}"
NOW = datetime(2026, 12, 1, tzinfo=UTC)
LEARNED = TrainingEvidence(curve=(2.0794, 1.2, 0.0123456), reference_curve=(2.0794, 1.1, 0.011),
                           accuracy=0.96875, reference_accuracy=1.0, chance=0.125,
                           agreement=1.0, recomputed_loss=0.0123)


def _document(evidence: TrainingEvidence, visibility: Visibility = Visibility.VISIBLE,
              passed: bool = True) -> dict[str, Any]:
    """A document with one probe check and the ``learns`` check of the ``training`` call."""
    attention = load_assignment("attention")
    probe = CheckSpec("1.1", "matches", "matches", ("plain",), 1.0)
    learns = CheckSpec("1.11", "it learns", "learns", ("training",), 1.0, visibility)
    verdict = CheckVerdict(passed, (), "" if passed else "it learns nothing")
    checks = [(probe, CheckVerdict(True, (), ""), 1.0), (learns, verdict, float(passed))]
    document = build_document(attention, checks, [], RunFacts(1, "test", "exited"), 0.1,
                              training={"training": evidence})
    return json.loads(json.dumps(document, allow_nan=False))  # as stored: strict JSON


def test_the_document_keeps_both_curves_the_accuracies_and_the_check_they_belong_to() -> None:
    (entry,) = _document(LEARNED)["training"]
    assert entry == {"version": 1, "call": "training", "tests": ["1.11"], "passed": True,
                     "outcome": "learned", "steps": [0, 1, 2], "curve": [2.079, 1.2, 0.01235],
                     "reference_curve": [2.079, 1.1, 0.011], "accuracy": 0.9688,
                     "reference_accuracy": 1.0, "chance": 0.125, "truncated": False}


def test_values_that_are_not_finite_are_stored_as_null() -> None:
    diverged = dataclasses.replace(LEARNED, curve=(2.08, math.inf, math.nan), diverged=True,
                                   accuracy=math.nan)
    (entry,) = _document(diverged, passed=False)["training"]
    assert entry["curve"] == [2.08, None, None] and entry["accuracy"] is None
    assert (entry["passed"], entry["outcome"]) == (False, "diverged")
    curves = read_entry(entry)
    assert curves is not None and curves.end is None
    assert curves.caption().startswith("Your model's training diverged")
    assert "loss 2.08 -> not a number" in curves.summary_line()


def test_a_long_curve_is_bounded_keeping_its_start_and_end() -> None:
    long = dataclasses.replace(LEARNED, curve=tuple(2.0 / (1 + i) for i in range(1000)),
                               reference_curve=tuple(1.0 / (1 + i) for i in range(1000)))
    (entry,) = _document(long)["training"]
    assert len(entry["steps"]) == len(entry["curve"]) == MAX_CURVE_POINTS
    assert entry["steps"][0] == 0 and entry["steps"][-1] == 999 and entry["truncated"]
    assert entry["curve"][-1] == 0.002 and entry["reference_curve"][-1] == 0.001
    assert entry["steps"] == sorted(set(entry["steps"]))


@pytest.mark.parametrize("visibility", [v for v in Visibility if v is not Visibility.VISIBLE],
                         ids=lambda v: v.value)
def test_the_student_sees_the_curve_only_once_its_check_is_released(
        visibility: Visibility) -> None:
    document = _document(LEARNED, visibility)
    held = student_view(document, now=NOW, due_at=None, results_published=False)
    assert held["training"] == [] and "reference_curve" not in json.dumps(held)
    shown = student_view(document, now=NOW, due_at=None, results_published=True)
    assert shown["training"] == document["training"]
    always = student_view(_document(LEARNED), now=NOW, due_at=None, results_published=False)
    assert always["training"] == document["training"]


def test_an_old_document_without_the_section_reads_as_none() -> None:
    document = _document(LEARNED)
    del document["training"]
    assert student_view(document, now=NOW, due_at=None, results_published=True)[
        "training"] == []
    assert "Training" not in render_report(document) and training_figures(None) == []


def _read(evidence: TrainingEvidence) -> TrainingCurves:
    (curves,) = read_section(_document(evidence, passed=evidence.passed)["training"])
    return curves


def test_the_caption_says_learned_or_where_it_stopped() -> None:
    assert _read(LEARNED).caption() == (
        "Your model learned: its loss fell from 2.08 to 0.0123, the reference's to 0.011 on "
        "the same seed, and it got 97% of the held-out answers right (the reference 100%, "
        "chance 12%).")
    flat = _read(dataclasses.replace(LEARNED, curve=(2.08, 2.05, 2.0), accuracy=0.14,
                                     recomputed_loss=2.0, recomputed_start=2.08))
    assert flat.outcome == "learned-nothing"
    assert flat.caption().startswith("Your model learned nothing: its loss stopped at 2 while "
                                     "the reference reached 0.011 on the same seed")
    part = _read(dataclasses.replace(LEARNED, curve=(2.08, 1.5, 0.9), accuracy=0.6,
                                     recomputed_loss=0.9))
    assert part.caption().startswith("Your model learned only part of the task: its loss "
                                     "stopped at 0.9 while")
    leak = _read(dataclasses.replace(LEARNED, accuracy=0.5))
    assert leak.outcome == "leaks-the-future"
    assert leak.caption().startswith("Your model fits its training sequences, not the task")
    assert "yet it got only 50% of the held-out answers right" in leak.caption()
    forged = _read(dataclasses.replace(LEARNED, logits_match=False))
    assert forged.outcome == "inconsistent"
    assert forged.caption().endswith("but check 1.11 did not pass: its output says why.")
    assert forged.summary_line().endswith(": learned, but computes something else")


def test_the_cli_report_has_one_summary_line_per_training() -> None:
    report = render_report(_document(LEARNED), plots=False)
    lines = [line for line in report.splitlines() if line.startswith("Training")]
    assert lines == ["Training (check 1.11): loss 2.08 -> 0.0123, reference -> 0.011; "
                     "held-out accuracy 97%, reference 100%: learned"]


@pytest.mark.parametrize("broken", [
    None, {}, {"version": 2}, {"curve": [1.0]},
    {"steps": [0, 1], "curve": [1.0], "reference_curve": [1.0, 0.5]},
    {"curve": ["x", 1.0], "reference_curve": [1.0, 0.5]},
    {"steps": [0, True], "curve": [1.0, 0.5], "reference_curve": [1.0, 0.5]},
    {"steps": list(range(2000)), "curve": [1.0] * 2000, "reference_curve": [1.0] * 2000},
    {"tests": "1.11"}, {"accuracy": "all"}])
def test_an_entry_this_code_cannot_read_is_left_out(broken: Any) -> None:
    (good,) = _document(LEARNED)["training"]
    entry = broken if broken is None or broken == {} else {**good, **broken}
    assert read_entry(entry) is None
    assert read_section([entry, good]) == read_section([good])


def test_numbers_a_float_cannot_hold_read_as_not_a_number() -> None:
    (good,) = _document(LEARNED)["training"]
    # What Python's JSON reader gives for ``NaN`` and for 1 followed by 400 zeros.
    curves = read_entry({**good, "curve": [math.nan, 1.0, 0.5], "accuracy": 10**400})
    assert curves is not None and curves.start is None and curves.accuracy is None


def test_the_figure_draws_two_curves_with_a_legend_a_title_a_desc_and_a_table() -> None:
    (figure,) = training_figures(_document(LEARNED)["training"])
    root = ET.fromstring(str(figure.svg))
    assert root.get("role") == "img"
    assert root.find(SVG + "title") is not None
    desc = root.find(SVG + "desc")
    assert desc is not None and desc.text == figure.caption
    assert len(list(root.iter(SVG + "polyline"))) == 2
    texts = [t.text for t in root.iter(SVG + "text")]
    assert {"your model", "the reference, same seed", "training step"} <= set(texts)
    assert [(r.step, r.student, r.reference) for r in figure.rows] == [
        (0, 2.079, 2.079), (1, 1.2, 1.1), (2, 0.01235, 0.011)]


def test_grading_puts_the_curves_of_the_training_in_the_document() -> None:
    use_one_thread()
    assignment = load_assignment("attention")
    plan = assignment.build_plan(3)
    student = run_in_process(assignment.reference(frozenset({"gradient-blocked"})), plan)
    judged = judge_outcomes(assignment, plan, student)
    document = build_document(assignment, judged.scored, judged.diagnoses,
                              RunFacts(3, "test", "exited"), 0.1, training=judged.training)
    (entry,) = json.loads(json.dumps(document, allow_nan=False))["training"]
    evidence = judged.training["training"]
    assert entry["tests"] == ["1.11"] and entry["passed"] is False
    assert len(entry["curve"]) == len(entry["reference_curve"]) == len(evidence.curve)
    assert entry["curve"][-1] == pytest.approx(evidence.curve[-1], rel=1e-3)
    curves = read_entry(entry)
    assert curves is not None and curves.end is not None and curves.reference_end is not None
    assert curves.end > 10 * curves.reference_end   # its gradients never reach q, k, v
    assert curves.outcome == "untrained-weights"
    assert curves.caption().startswith("Parts of your model never trained (no gradient "
                                       "reached them): its loss stopped at")
