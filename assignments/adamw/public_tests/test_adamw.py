"""Public tests for `AdamW`: run `pytest public_tests/` (set SUBMISSION=path/to/adamw.py to
test your own file; by default the starter is tested)."""

import importlib.util
import os
from pathlib import Path

import pytest
import torch

DEFAULT = Path(__file__).resolve().parent.parent / "starter" / "adamw.py"


@pytest.fixture(scope="module")
def adamw_class(pytestconfig):
    kernel = getattr(pytestconfig, "autograde_namespace", None)
    if kernel is not None:  # run by autograde.check() in a notebook: the kernel's own
        return kernel["AdamW"]
    path = Path(os.environ.get("SUBMISSION", DEFAULT)).resolve()
    spec = importlib.util.spec_from_file_location("student_adamw", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AdamW


def run(make, steps=4, **hyperparameters):
    """Step an optimiser made by ``make`` on one parameter; the values after each step."""
    g = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.randn(2, 3, generator=g))
    grads = [torch.randn(2, 3, generator=g) for _ in range(steps)]
    optimiser = make([p], **hyperparameters)
    values = []
    for grad in grads:
        p.grad = grad.clone()
        optimiser.step()
        values.append(p.detach().clone())
    return values


def test_one_parameter_matches_torch(adamw_class):
    hyperparameters = {"lr": 0.1, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.1}
    ours = run(adamw_class, **hyperparameters)
    theirs = run(torch.optim.AdamW, **hyperparameters)
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True), start=1):
        assert torch.allclose(a, b, atol=1e-5), f"step {step} differs from torch.optim.AdamW"


def test_first_step_by_hand(adamw_class):
    # with bias correction, the first step moves each entry by lr * sign(grad) (eps aside)
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    p.grad = torch.tensor([0.5, -3.0])
    adamw_class([p], lr=0.1, weight_decay=0.0).step()
    assert torch.allclose(p.detach(), torch.tensor([0.9, -1.9]), atol=1e-5)


def test_a_parameter_without_gradient_is_left_alone(adamw_class):
    p, q = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    optimiser = adamw_class([p, q], lr=0.1, weight_decay=0.5)
    p.grad = torch.ones(3)
    optimiser.step()
    assert torch.equal(q.detach(), torch.ones(2))


def test_parameters_are_updated_in_place(adamw_class):
    p = torch.nn.Parameter(torch.ones(3))
    before = p.data_ptr()
    optimiser = adamw_class([p], lr=0.1)
    p.grad = torch.ones(3)
    optimiser.step()
    assert p.data_ptr() == before and not torch.equal(p.detach(), torch.ones(3))


def test_negative_learning_rate_raises(adamw_class):
    with pytest.raises(ValueError):
        adamw_class([torch.nn.Parameter(torch.ones(1))], lr=-0.1)
