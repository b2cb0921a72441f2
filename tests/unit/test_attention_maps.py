"""Attention maps in the results document: which diagnoses get one, what it holds, who sees it,
and the CLI's text rendering (golden file ``tests/golden/attention-maps.txt``; regenerate with
``AUTOGRADE_UPDATE_GOLDEN=1``)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from grader import maps
from grader.in_process import run_in_process
from grader.learning import is_training
from grader.loader import load_assignment
from grader.maps import MAX_SIDE, WEIGHT_CODES
from grader.pipeline import judge_outcomes, use_one_thread
from grader.report import attention_map_lines, render_report
from service.submissions.visibility import student_view
from service.web.figures import attention_figure

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "attention-maps.txt"
SEED = 2024
CASES = [("attention", "softmax-wrong-axis"), ("attention", "mask-fill-zero"),
         ("multi-head-attention", "causal-leak"), ("multi-head-attention", "padding-ignored")]


def _diagnoses(slug: str, mistake: str) -> list:
    use_one_thread()
    assignment = load_assignment(slug)
    plan = assignment.build_plan(SEED)
    student = run_in_process(assignment.reference(frozenset({mistake})), plan)
    return judge_outcomes(assignment, plan, student)[1]


@pytest.mark.parametrize(("slug", "mistake"), CASES)
def test_a_weight_diagnosis_carries_a_bounded_map_of_a_call_it_cites(slug, mistake):
    (diagnosis,) = [d for d in _diagnoses(slug, mistake) if d.code == mistake]
    picture = json.loads(json.dumps(diagnosis.to_json()))["attention_map"]
    assert picture["version"] == 1
    assert set(picture["tests"]) <= set(diagnosis.tests) and picture["tests"]
    assert picture["source"] == ("returned" if slug == "attention" else "reproduced")
    for panel in picture["panels"]:
        assert 0 < len(panel["student"]) <= MAX_SIDE
        assert all(len(row) <= MAX_SIDE for row in panel["student"])
        assert len(panel["blocked"]) == len(panel["expected"]) == len(panel["student"])
        assert any(a != b for ra, rb in zip(panel["student"], panel["expected"], strict=True)
                   for a, b in zip(ra, rb, strict=True))
    if mistake in ("causal-leak", "padding-ignored", "mask-fill-zero"):
        # The evidence: weight on keys that must be blocked.
        assert any(b and (s or 0) > 1e-3 for p in picture["panels"]
                   for rs, rb in zip(p["student"], p["blocked"], strict=True)
                   for s, b in zip(rs, rb, strict=True))
    if slug == "multi-head-attention":
        assert [p["head"] for p in picture["panels"]] == list(range(len(picture["panels"])))


def test_only_weight_codes_get_a_map():
    diagnoses = _diagnoses("multi-head-attention", "missing-out-proj")
    assert diagnoses and all(d.code not in WEIGHT_CODES and d.picture is None
                             for d in diagnoses)


def _document(slug: str, mistake: str) -> dict:
    return {"score": 0, "max_score": 10, "execution_time": 0, "output": "", "tests": [],
            "diagnoses": [d.to_json() for d in _diagnoses(slug, mistake)]}


def test_cli_map_golden_and_no_plots():
    text = "\n\n".join(f"== {slug} / {mistake} ==\n" + "\n".join(attention_map_lines(
        next(d for d in _document(slug, mistake)["diagnoses"] if d["code"] == mistake)
        ["attention_map"], "  ")) for slug, mistake in CASES) + "\n"
    if os.environ.get("AUTOGRADE_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
    document = _document("attention", "softmax-wrong-axis")
    assert "Attention weights on" in render_report(document)
    assert "Attention weights on" not in render_report(document, plots=False)


def test_the_student_sees_a_map_only_with_a_released_check_it_belongs_to():
    document = _document("attention", "softmax-wrong-axis")
    diagnosis = next(d for d in document["diagnoses"] if d["code"] == "softmax-wrong-axis")
    cited = diagnosis["attention_map"]["tests"]
    document["tests"] = [{"number": n, "name": n, "score": 0, "max_score": 1,
                          "status": "failed", "output": "", "tags": [],
                          "visibility": "hidden" if n in cited else "visible"}
                         for n in diagnosis["tests"]]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    held = student_view(document, now=now, due_at=None, results_published=False)
    shown = student_view(document, now=now, due_at=None, results_published=True)
    told = [d for d in held["diagnoses"] if d["code"] == "softmax-wrong-axis"]
    assert all("attention_map" not in d for d in told)
    assert next(d for d in shown["diagnoses"] if d["code"] == "softmax-wrong-axis")[
        "attention_map"] == diagnosis["attention_map"]


def test_the_page_figure_reads_the_map_and_refuses_malformed_ones():
    picture = next(d for d in _document("multi-head-attention", "causal-leak")["diagnoses"]
                   if d["code"] == "causal-leak")["attention_map"]
    figure = attention_figure(picture)
    assert figure is not None and len(figure.panels) == len(picture["panels"])
    assert figure.student_label == "Weights that reproduce your outputs"
    assert all(p.differing > 0 and "<svg" in p.student_svg for p in figure.panels)
    for broken in (None, {}, {**picture, "version": 2}, {**picture, "panels": [{"student": 1}]},
                   {**picture, "panels": [{**picture["panels"][0],
                                           "student": [["x"]]}]},
                   {**picture, "panels": [{**picture["panels"][0],
                                           "expected": [[0.1] * 40] * 40}]}):
        assert attention_figure(broken) is None


def test_every_report_command_takes_no_plots():
    from service.cli.parser import build_parser

    parser = build_parser()
    for argv in (["grade", "--assignment", "attention", "a.py"], ["submit", "a.py",
                 "--assignment", "attention"], ["status", "3"]):
        assert parser.parse_args(argv).plots is True
        assert parser.parse_args([*argv, "--no-plots"]).plots is False


def test_a_reproduced_map_runs_its_call_only_to_the_first_forward():
    """A map reproduced on the training probe's call needs the weights of its first forward:
    the training's other steps, run in the grader's process, would only cost time."""
    use_one_thread()
    assignment = load_assignment("multi-head-attention")
    plan = assignment.build_plan(SEED)
    training = next(call for call in plan.calls if is_training(call))
    forwards = []

    def counted(mistakes):
        space = dict(assignment.reference(mistakes))
        target = training.spec["target"]

        class Counted(space[target]):
            def forward(self, *args, **kwargs):
                forwards.append(target)
                return super().forward(*args, **kwargs)

        space[target] = Counted
        return space

    panels, source = maps._reproduced_panels(plan, training.id, counted,
                                             frozenset({"causal-leak"}))
    assert source == "reproduced" and panels
    assert len(forwards) == 2  # the variant's first forward, then the reference's
