"""Diagnosis by behaviour: each known mistake, and pairs of them, get exactly their own codes.

The variants run in process here (they are our own code); the corpus and hostile suites cover
independently written submissions through the sandbox.
"""

from __future__ import annotations

import pytest

from assignments import Assignment
from grader.authoring import coverage_report
from grader.in_process import run_in_process
from grader.loader import load_assignment
from grader.outcomes import CallOutcome
from grader.pipeline import VariantKey, judge_outcomes, use_one_thread


def _codes(assignment: Assignment, mistakes: set[str], seed: int) -> tuple[set[str], float]:
    use_one_thread()
    plan = assignment.build_plan(seed)
    student = run_in_process(assignment.reference(frozenset(mistakes)), plan)
    scored, diagnoses, *_ = judge_outcomes(assignment, plan, student)
    return {d.code for d in diagnoses}, sum(score for _, _, score in scored)


@pytest.mark.parametrize("slug", ["attention", "multi-head-attention", "attention-kv-cache",
                                  "adamw", "cross-entropy"])
# The fast default grades every mistake on one seed; the whole suite on both.
@pytest.mark.parametrize("seed", [11, pytest.param(12, marks=pytest.mark.slow)])
def test_every_single_mistake_gets_exactly_its_code_and_loses_points(slug: str, seed: int) -> None:
    assignment = load_assignment(slug)
    assert _codes(assignment, set(), seed) == (set(), assignment.max_score)
    for mistake in assignment.mistakes:
        codes, score = _codes(assignment, {mistake.id}, seed)
        assert codes == {mistake.code}, mistake.id
        assert score < assignment.max_score, mistake.id


@pytest.mark.parametrize(("slug", "pair"), [
    ("attention", {"softmax-wrong-axis", "missing-scale"}),
    ("attention", {"mask-inverted", "wrong-scale-d"}),
    ("multi-head-attention", {"reshape-without-transpose", "wrong-scale-d-model"}),
    ("multi-head-attention", {"causal-leak", "missing-out-proj"}),
    ("multi-head-attention", {"padding-ignored", "causal-off-by-one"}),
    ("attention-kv-cache", {"rope-interleaved", "cache-padding-lost"}),
    ("attention-kv-cache", {"causal-not-shifted", "query-padding-ignored"}),
    ("adamw", {"l2-in-gradient", "shared-step-counter"}),
    ("adamw", {"decay-after-update", "state-reset"}),
    # Two mistakes of one code: found together, the code named once.
    ("multi-head-attention", {"mask-inverted", "padding-inverted"}),
    ("attention-kv-cache", {"odd-head-rope-accepted", "offset-not-continuing-accepted"}),
    # Mistakes that act on what the other left: -inf from a log where the wrong axis made
    # probabilities tiny; a wrong mean behind an ignored reduction.
    ("cross-entropy", {"log-of-softmax", "class-axis-0"}),
    ("cross-entropy", {"no-max-shift", "log-of-softmax"}),
    ("cross-entropy", {"smoothing-k-minus-1", "reduction-ignored"}),
])
def test_two_mistakes_get_both_codes(slug: str, pair: set[str]) -> None:
    assignment = load_assignment(slug)
    codes, _ = _codes(assignment, pair, seed=21)
    assert codes == {assignment.mistake(m).code for m in pair}


def test_three_mistakes_are_named_per_scenario_without_guessing(attention: Assignment) -> None:
    codes, score = _codes(attention, {"softmax-wrong-axis", "missing-scale", "mask-fill-zero"}, 4)
    assert {"softmax-wrong-axis", "missing-scale"} <= codes
    assert codes <= {"softmax-wrong-axis", "missing-scale", "mask-fill-zero", "wrong-output"}
    assert score < attention.max_score


@pytest.mark.slow
@pytest.mark.parametrize("slug", ["attention", "multi-head-attention", "attention-kv-cache",
                                  "adamw", "cross-entropy"])
def test_assignment_check_is_sound_for_every_co_occurring_pair(slug: str) -> None:
    report = coverage_report(load_assignment(slug), seed=31, workers=2)
    assert report.sound, report.render()


def test_variants_kept_across_submissions_change_no_verdict(attention: Assignment) -> None:
    use_one_thread()
    plan = attention.build_plan(5)
    kept: dict[VariantKey, CallOutcome] = {}
    for mistakes in ({"softmax-wrong-axis"}, {"missing-scale", "mask-inverted"}):
        student = run_in_process(attention.reference(frozenset(mistakes)), plan)
        alone = judge_outcomes(attention, plan, student)
        before = len(kept)
        shared = judge_outcomes(attention, plan, student, variants=kept)
        assert len(kept) > before
        assert [d.to_json() for d in shared.diagnoses] == [d.to_json() for d in alone.diagnoses]
        assert [s for _, _, s in shared.scored] == [s for _, _, s in alone.scored]
    runs = len(kept)
    student = run_in_process(attention.reference(frozenset({"softmax-wrong-axis"})), plan)
    judge_outcomes(attention, plan, student, variants=kept)
    assert len(kept) == runs  # the same submission again runs no variant anew
