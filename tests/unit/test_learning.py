"""The ``learns`` check's verdict: computed on the host from what the training returned."""

from __future__ import annotations

import dataclasses
import functools
import runpy
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from assignments import Assignment, ProbePlan
from assignments.training_task import DEFAULT_TRAINING_SEEDS
from grader import learning
from grader.in_process import run_call_in_process, run_in_process
from grader.learning import TrainingEvidence
from grader.loader import load_assignment
from grader.outcomes import CallOutcome
from grader.pipeline import judge_outcomes, use_one_thread
from sandbox import training

CORRECT = TrainingEvidence(curve=(2.1, 1.0, 0.01), reference_curve=(2.1, 0.9, 0.01),
                           accuracy=1.0, reference_accuracy=1.0, chance=0.125, agreement=1.0,
                           recomputed_loss=0.01)


def test_a_model_that_learned_what_its_weights_compute_passes() -> None:
    assert CORRECT.passed and CORRECT.observation() is None


def test_fitting_the_training_data_but_not_the_hidden_future_is_a_leak() -> None:
    leaky = dataclasses.replace(CORRECT, accuracy=0.7, agreement=0.7, recomputed_loss=0.3)
    assert leaky.leaks_the_future and not leaky.passed
    assert "leaks the future" in str(leaky.observation())


def test_a_loss_that_does_not_fall_learns_nothing() -> None:
    flat = dataclasses.replace(CORRECT, curve=(2.1, 2.05, 2.0), accuracy=0.14,
                               recomputed_loss=2.0)
    assert not flat.passed and not flat.leaks_the_future
    assert str(flat.observation()).startswith("it learns nothing")


def test_accurate_predictions_that_the_weights_do_not_give_fail() -> None:
    forged = dataclasses.replace(CORRECT, agreement=0.5, logits_match=False)
    assert not forged.passed
    assert "does not compute what it trained" in str(forged.observation())


def test_the_reported_loss_is_never_judged_only_the_recomputed_one() -> None:
    # A curve that claims to fall to 0 on weights whose loss stays where it started.
    forged = dataclasses.replace(CORRECT, curve=(2.1, 0.0), accuracy=0.14,
                                 recomputed_loss=2.05, recomputed_start=2.1)
    assert forged.learned_nothing and not forged.passed
    # A true model's verdict does not move with what it reported.
    assert dataclasses.replace(CORRECT, curve=(9.0, 5.0)).passed


def test_a_diverged_training_fails() -> None:
    diverged = dataclasses.replace(CORRECT, curve=(2.1, float("nan")), diverged=True)
    assert "diverged" in str(diverged.observation())


def test_weights_that_never_trained_fail_however_well_the_rest_did() -> None:
    frozen = dataclasses.replace(CORRECT, untrained=("attend.layer.k_proj.weight",))
    assert not frozen.passed and frozen.outcome == "untrained-weights"
    assert "`attend.layer.k_proj.weight` stayed exactly at their initial values" in str(
        frozen.observation())


@given(accuracy=st.floats(0, 1), agreement=st.floats(0, 1), end=st.floats(0, 3),
       recomputed=st.floats(0, 3), match=st.booleans(), future=st.floats(0, 1),
       frozen=st.booleans())
def test_it_passes_exactly_when_there_is_nothing_to_say(
        accuracy: float, agreement: float, end: float, recomputed: float, match: bool,
        future: float, frozen: bool) -> None:
    evidence = dataclasses.replace(CORRECT, curve=(2.1, end), accuracy=accuracy,
                                   agreement=agreement, recomputed_loss=recomputed,
                                   logits_match=match, future_sensitivity=future,
                                   untrained=("readout.bias",) if frozen else ())
    assert evidence.passed == (evidence.observation() is None)


@functools.cache
def _graded(slug: str, seed: int) -> tuple[Assignment, ProbePlan, dict[str, CallOutcome]]:
    use_one_thread()
    assignment = load_assignment(slug)
    plan = assignment.build_plan(seed)
    return assignment, plan, run_in_process(assignment.reference(frozenset()), plan)


def _learns(assignment: Assignment, plan: ProbePlan,
            student: dict[str, CallOutcome]) -> tuple[bool, float, list[str]]:
    scored, diagnoses, *_ = judge_outcomes(assignment, plan, student)
    (_check, verdict, score), = [s for s in scored if s[0].kind == "learns"]
    return verdict.passed, score, [d.code for d in diagnoses]


def _with_outputs(outcome: CallOutcome, **changed: torch.Tensor) -> CallOutcome:
    forward = outcome.forwards[0]
    outputs = dict(zip(("curve", "logits", "weights"), forward.outputs, strict=True))
    outputs.update(changed)
    forward = dataclasses.replace(forward, outputs=tuple(outputs.values()))
    return dataclasses.replace(outcome, forwards=(forward,))


@pytest.mark.parametrize("slug", ["attention", "multi-head-attention"])
def test_the_reference_learns_on_several_seeds(slug: str) -> None:
    for seed in (0, 7):
        assignment, plan, reference = _graded(slug, seed)
        assert _learns(assignment, plan, reference) == (True, 1.0, [])


def test_forged_predictions_get_nothing() -> None:
    assignment, plan, reference = _graded("attention", 0)
    call = plan.call("training")
    held_out = reference["training"].forwards[0].outputs[1]
    assert held_out is not None
    forged = held_out.clone()
    rows = torch.arange(forged.shape[0])
    forged[rows, call.meta["asked"]] = 0.0
    forged[rows, call.meta["asked"], call.meta["answers"]] = 30.0
    untrained = _weights_of(plan, "training.init.")
    student = {**reference, "training": _with_outputs(reference["training"], logits=forged,
                                                      weights=untrained)}
    passed, score, _ = _learns(assignment, plan, student)
    assert (passed, score) == (False, 0.0)


def test_a_forged_curve_gets_nothing() -> None:
    assignment, plan, reference = _graded("multi-head-attention", 0)
    curve = reference["training"].forwards[0].outputs[0]
    assert curve is not None
    falling = torch.linspace(float(curve[0]), 0.0, curve.numel(), dtype=torch.float64)
    # Untrained weights and the logits they really give, with a curve that claims learning.
    untrained = _weights_of(plan, "training.init.")
    model = training.build_model(assignment.reference(frozenset()), plan.call("training").spec)
    training.load_weights(model, plan.call("training").spec["learn"]["weights"], flat=untrained)
    logits = training.held_out_logits(model, plan.inputs["training.held_out"])
    student = {**reference, "training": _with_outputs(
        reference["training"], curve=falling, logits=logits, weights=untrained)}
    assert _learns(assignment, plan, student)[:2] == (False, 0.0)
    # And the true outcome with a rescaled curve passes: the curve is shown, not judged.
    rescaled = {**reference, "training": _with_outputs(reference["training"], curve=curve * 0.5)}
    assert _learns(assignment, plan, rescaled)[:2] == (True, 1.0)


def test_a_projection_no_gradient_reaches_is_named_on_every_training_seed() -> None:
    # k and v computed under torch.no_grad(): the model may still learn the task on some
    # seeds, but those projections never move, on all of them.
    source = (Path(__file__).resolve().parents[1] / "corpus" / "multi-head-attention"
              / "kv_under_no_grad.py")
    namespace = runpy.run_path(str(source), run_name="submission")
    for seed in range(DEFAULT_TRAINING_SEEDS):
        assignment, plan, reference = _graded("multi-head-attention", seed)
        student = {"training": run_call_in_process(namespace, plan, "training")}
        evidence = learning.assess(assignment, plan, student, reference)["training"]
        assert evidence.untrained == tuple(f"attend.layer.{p}_proj.{w}" for p in "kv"
                                           for w in ("weight", "bias")), seed
        assert not evidence.passed


def test_skipping_training_gets_nothing() -> None:
    assignment, plan, reference = _graded("attention", 0)
    student = {**reference, "training": _with_outputs(
        reference["training"], weights=_weights_of(plan, "training.init."))}
    assert _learns(assignment, plan, student)[:2] == (False, 0.0)


def _weights_of(plan: ProbePlan, prefix: str) -> torch.Tensor:
    names = plan.call("training").spec["learn"]["weights"]
    return torch.cat([plan.inputs[prefix + name].reshape(-1).float() for name in names])


def test_the_reference_training_is_computed_once_per_training_seed() -> None:
    assignment = load_assignment("attention")
    cache = learning.ReferenceTrainings()
    first = cache.outcomes(assignment, assignment.build_plan(3))["training"]
    # Grading seeds that pick the same training seed share it; 24 gradings train 8 times.
    assert cache.outcomes(assignment, assignment.build_plan(3 + 8))["training"] is first
    for seed in range(100, 124):
        cache.outcomes(assignment, assignment.build_plan(seed))
    assert cache.computed == DEFAULT_TRAINING_SEEDS == 8


def test_prepared_trainings_leave_nothing_to_train_for_any_grading_seed() -> None:
    """What a service worker does before it forks its grading processes."""
    assignment = load_assignment("attention")
    cache = learning.ReferenceTrainings()
    assert cache.prepare(assignment) == DEFAULT_TRAINING_SEEDS
    for seed in (0, 7, 8, 12345, 2**31 - 1):
        cache.outcomes(assignment, assignment.build_plan(seed))
    assert cache.computed == DEFAULT_TRAINING_SEEDS
    assert cache.prepare(assignment) == 0
    assert cache.prepare(dataclasses.replace(assignment, training=None)) == 0


def test_grading_seeds_pick_training_seeds_whose_tasks_differ() -> None:
    assignment = load_assignment("multi-head-attention")
    plans = [assignment.build_plan(seed) for seed in (5, 5 + 8, 6)]
    data = [plan.inputs["training.data"] for plan in plans]
    assert torch.equal(data[0], data[1]) and not torch.equal(data[0], data[2])
    assert [p.call("training").meta["training_seed"] for p in plans] == [5, 5, 6]


@pytest.mark.parametrize(("slug", "mistake", "code"), [
    ("attention", "softmax-wrong-axis", "softmax-wrong-axis"),
    ("attention", "mask-ignored", "mask-ignored"),
    ("multi-head-attention", "causal-leak", "causal-leak"),
])
def test_a_known_mistake_fails_the_training_and_keeps_its_own_code(
        slug: str, mistake: str, code: str) -> None:
    assignment, plan, _ = _graded(slug, 0)
    student = run_in_process(assignment.reference(frozenset({mistake})), plan)
    passed, score, codes = _learns(assignment, plan, student)
    assert (passed, score, codes) == (False, 0.0, [code])


def test_a_leak_no_probe_explains_is_named_by_the_training() -> None:
    assignment, plan, _ = _graded("multi-head-attention", 0)
    leaky = run_in_process(assignment.reference(frozenset({"causal-leak"})), plan)
    correct = _graded("multi-head-attention", 0)[2]
    student = {**correct, "training": leaky["training"]}
    passed, _, codes = _learns(assignment, plan, student)
    assert not passed and codes == ["causal-leak"]


@pytest.mark.parametrize(("slug", "mistake"), [("attention", "missing-scale"),
                                               ("multi-head-attention", "missing-scale")])
def test_a_missing_scale_gets_the_same_learns_verdict_on_every_seed(slug: str,
                                                                    mistake: str) -> None:
    # Its model learns, but its trained weights give other logits with correct attention: the
    # host cannot vouch for the training, on any seed (a share-of-argmax threshold let it pass
    # on some seeds and fail on others).
    verdicts = set()
    for seed in range(5):
        assignment, plan, _ = _graded(slug, seed)
        student = run_in_process(assignment.reference(frozenset({mistake})), plan)
        verdicts.add(_learns(assignment, plan, student)[:2])
    assert verdicts == {(False, 0.0)}
