"""Runs of trusted code in the grader's process: the same call gives the same values whatever
runs beside it (the grader grades from several threads at once)."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from grader.in_process import run_call_in_process
from grader.loader import load_assignment

ROOT = Path(__file__).resolve().parents[2]


def test_a_seeded_dropout_forward_gives_the_same_values_beside_other_threads() -> None:
    # The variant "dropout in eval" draws its masks from the global generator after the call's
    # seed: another thread's seeding or drawing in between would change them, and the grader
    # would think the variant's two seeded forwards agree (or the student's differ).
    assignment = load_assignment("multi-head-attention")
    plan = assignment.build_plan(7)
    variant = assignment.reference(frozenset({"dropout-in-eval"}))

    def outputs(_: int) -> list[torch.Tensor]:
        outcome = run_call_in_process(variant, plan, "eval-dropout", backward=False)
        return [o for forward in outcome.forwards for o in forward.outputs if o is not None]

    alone = outputs(0)
    assert len(alone) == 2 and not torch.equal(alone[0], alone[1])  # two seeds, two masks
    with ThreadPoolExecutor(max_workers=8) as pool:
        for together in pool.map(outputs, range(64)):
            assert all(torch.equal(a, b) for a, b in zip(alone, together, strict=True))


def test_every_gradient_is_recorded_beside_other_threads_running_calls() -> None:
    # The grader runs the reference and variants in several threads at once. The leaves behind
    # a forward's arguments were kept in one map for the process: another thread's forward
    # cleared it, and a gradient went unrecorded (check 1.9 then failed, on a seed, in CI).
    assignment = load_assignment("attention")
    plan = assignment.build_plan(11)
    reference = assignment.reference(frozenset())

    def gradients(_: int) -> int:
        outcome = run_call_in_process(reference, plan, "grad-plain")
        return sum(len(forward.grads) for forward in outcome.forwards)

    alone = gradients(0)
    assert alone == 3  # q, k, v
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(gradients, range(400))) == {alone}


def test_python_is_parsed_only_through_the_one_parser_that_serialises_threads() -> None:
    # ast.parse from two threads at once can fail in CPython 3.11 (python/cpython#106905).
    direct = []
    for path in sorted(p for package in ("grader", "service", "assignments", "autograde")
                       for p in (ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "parse" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "ast"):
                direct.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert direct == ["grader/parsing.py:" + str(_parse_line())]


def _parse_line() -> int:
    source = (ROOT / "grader" / "parsing.py").read_text(encoding="utf-8")
    return next(n for n, line in enumerate(source.splitlines(), 1)
                if "return ast.parse(" in line)


def test_a_training_with_dropout_gives_the_same_curve_to_the_last_digit_beside_other_threads(
) -> None:
    # The training probe runs a whole training on the global generator (dropout masks): its
    # seed comes from the grading seed, and no other thread's draws may land in it.
    assignment = load_assignment("multi-head-attention")
    plan = assignment.build_plan(3)
    reference = assignment.reference(frozenset())
    base = reference["ManualMultiHeadAttention"]

    class WithDropout(base):  # type: ignore[misc, valid-type]
        def __init__(self, d_model: int, num_heads: int, **kwargs: object) -> None:
            super().__init__(d_model, num_heads, **{**kwargs, "dropout": 0.3})

    namespace = {**reference, "ManualMultiHeadAttention": WithDropout}

    def curve(_: int) -> torch.Tensor:
        outcome = run_call_in_process(namespace, plan, "training")
        values = outcome.forwards[0].outputs[0]
        assert values is not None
        return values

    variant = assignment.reference(frozenset({"dropout-in-eval"}))

    def noise(_: int) -> None:  # other seeds' dropout, and modules built, meanwhile
        for _ in range(20):
            run_call_in_process(variant, plan, "eval-dropout", backward=False)

    alone = curve(0)
    undropped = run_call_in_process(reference, plan, "training").forwards[0].outputs[0]
    assert undropped is not None and not torch.equal(alone, undropped)  # dropout drew masks
    with ThreadPoolExecutor(max_workers=4) as pool:
        noisy = [pool.submit(noise, i) for i in range(4)]
        curves = list(pool.map(curve, range(3)))
        for future in noisy:
            future.result()
    assert all(torch.equal(alone, other) for other in curves)
