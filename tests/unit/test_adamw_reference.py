"""The `adamw` lab's reference is torch.optim.AdamW's update, step by step, for any
hyperparameters, parameter groups and pattern of missing gradients."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.loader import load_assignment

ASSIGNMENT = load_assignment("adamw")


def _run(make: Any, groups: list[dict[str, Any]], start: list[torch.Tensor],
         grads: list[list[torch.Tensor | None]], **defaults: Any) -> list[torch.Tensor]:
    parameters = [torch.nn.Parameter(t.clone()) for t in start]
    built = [{**{k: v for k, v in group.items() if k != "params"},
              "params": [parameters[i] for i in group["params"]]} for group in groups]
    optimiser = make(built, **defaults)
    for step in grads:
        for parameter, grad in zip(parameters, step, strict=True):
            parameter.grad = None if grad is None else grad.clone()
        optimiser.step()
    return [p.detach() for p in parameters]


hyperparameters = st.fixed_dictionaries({}, optional={
    "lr": st.floats(1e-4, 0.5), "betas": st.tuples(st.floats(0.0, 0.99), st.floats(0.0, 0.999)),
    "eps": st.floats(1e-8, 0.1), "weight_decay": st.floats(0.0, 1.0)})


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 8),
       first=hyperparameters, second=hyperparameters, defaults=hyperparameters,
       missing=st.sets(st.tuples(st.integers(0, 7), st.integers(0, 2))))
def test_the_reference_steps_exactly_as_torchs_adamw(
        seed: int, steps: int, first: dict[str, Any], second: dict[str, Any],
        defaults: dict[str, Any], missing: set[tuple[int, int]]) -> None:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(3, 2), (4,), (2, 2)]
    start = [torch.randn(shape, generator=generator) for shape in shapes]
    grads: list[list[torch.Tensor | None]] = [
        [None if (step, index) in missing else torch.randn(shape, generator=generator)
         for index, shape in enumerate(shapes)] for step in range(steps)]
    groups = [{"params": [0, 1], **first}, {"params": [2], **second}]
    reference = ASSIGNMENT.reference(frozenset())["AdamW"]
    ours = _run(reference, groups, start, grads, **defaults)
    theirs = _run(lambda g, **k: torch.optim.AdamW(g, foreach=False, **k), groups, start, grads,
                  **defaults)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)
