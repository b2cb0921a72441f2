"""Mistakes only training (or training-like use) shows: unstable softmax, dropout, unregistered
projections (issue 16, item 3). Each is found by behaviour, the same way on every seed."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch
from torch import nn

from assignments import Assignment
from devkit.paths import TESTS
from grader.checks import CheckContext, check_kinds, judge
from grader.in_process import run_call_in_process, run_in_process
from grader.pipeline import judge_outcomes

SEEDS = (0, 7, 2024)


def _probes() -> Any:
    path = TESTS.parent / "assignments" / "multi-head-attention" / "hidden" / "probes.py"
    spec = importlib.util.spec_from_file_location("mha_probes_for_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_dropout_slots_give_one_weight_per_entry_with_or_without_a_transpose() -> None:
    probes = _probes()
    slots, head_dim = probes.DROPOUT_SLOTS, probes.D // probes.H
    assert all(sorted(row) == list(range(probes.DROPOUT_KEYS)) for row in slots)
    # a plain reshape of (T, D) into (H, T, head_dim): head h' reads blocks 4h'..4h'+3, block
    # 3t + h being token t's slice of head h
    for scrambled in range(probes.H):
        blocks = range(scrambled * head_dim, (scrambled + 1) * head_dim)
        offsets = [slots[block % probes.H][block // probes.H] for block in blocks]
        assert len(set(offsets)) == head_dim


@pytest.mark.parametrize("slug", ["attention", "multi-head-attention"])
@pytest.mark.parametrize("seed", SEEDS)
def test_large_scores_are_finite_for_the_reference_and_nan_for_an_unstable_softmax(
        slug: str, seed: int, attention: Assignment, mha: Assignment) -> None:
    assignment = attention if slug == "attention" else mha
    plan = assignment.build_plan(seed)
    stable = run_call_in_process(assignment.reference(frozenset()), plan, "large-scores")
    unstable = run_call_in_process(assignment.reference(frozenset({"unstable-softmax"})), plan,
                                   "large-scores")
    output, broken = stable.forwards[0].outputs[0], unstable.forwards[0].outputs[0]
    assert output is not None and broken is not None
    assert bool(torch.isfinite(output).all())
    assert bool(torch.isnan(broken).all())


def _dropout_verdict(mha: Assignment, seed: int, mistakes: frozenset[str]) -> str:
    plan = mha.build_plan(seed)
    check = next(c for c in mha.checks if c.kind == "dropout")
    student, reference = ({call: run_call_in_process(mha.reference(which), plan, call)
                           for call in check.calls} for which in (mistakes, frozenset()))
    verdict = judge(check, CheckContext(plan=plan, student=student, reference=reference),
                    check_kinds())
    return verdict.observation


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("mistake", "words"), [
    ("", ""),
    ("dropout-on-output", "dropout was applied to the output"),
    ("dropout-unscaled", "not scaled by 1 / (1 - p)"),
    ("dropout-missing", "no dropout was applied"),
    ("softmax-wrong-axis", ""),  # a wrong eval() output is the other checks' business
    ("reshape-without-transpose", ""),
    ("missing-out-proj", ""),
])
def test_the_dropout_check_reads_the_weights_back_from_the_output(
        mha: Assignment, seed: int, mistake: str, words: str) -> None:
    observation = _dropout_verdict(mha, seed, frozenset({mistake} - {""}))
    if words:
        assert words in observation
    else:
        assert "train()" not in observation


def test_a_dropout_mistake_is_named_by_the_check_not_the_search(mha: Assignment) -> None:
    plan = mha.build_plan(11)
    student = run_in_process(mha.reference(frozenset({"dropout-unscaled"})), plan)
    diagnoses = judge_outcomes(mha, plan, student).diagnoses
    assert [d.code for d in diagnoses] == ["dropout-wrong"]


def test_unregistered_projections_are_one_code(mha: Assignment) -> None:
    plan = mha.build_plan(5)
    student = run_in_process(mha.reference(frozenset({"parameters-not-registered"})), plan)
    assert student["self"].unregistered
    diagnoses = judge_outcomes(mha, plan, student).diagnoses
    assert [d.code for d in diagnoses] == ["parameters-not-registered"]
    assert "`self.projections` is a plain list of 4 modules" in diagnoses[0].message


class _Renamed(nn.Module):
    """Registered layers under names other than the contract's: an interface error."""

    def __init__(self, d_model: int, num_heads: int, **_: Any) -> None:
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        output: torch.Tensor = self.wo(query)
        return output


def test_layers_registered_under_other_names_stay_an_interface_error(mha: Assignment) -> None:
    plan = mha.build_plan(5)
    outcome = run_call_in_process({"ManualMultiHeadAttention": _Renamed}, plan, "self")
    assert outcome.status == "interface" and not outcome.unregistered
    assert "no parameter 'q_proj.weight'" in outcome.detail
