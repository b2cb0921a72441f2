"""Public tests for `cross_entropy`: run `pytest public_tests/` (set
SUBMISSION=path/to/cross_entropy.py to test your own file; by default the starter is tested)."""

import importlib.util
import math
import os
from pathlib import Path

import pytest
import torch

DEFAULT = Path(__file__).resolve().parent.parent / "starter" / "cross_entropy.py"


@pytest.fixture(scope="module")
def cross_entropy(pytestconfig):
    kernel = getattr(pytestconfig, "autograde_namespace", None)
    if kernel is not None:  # run by autograde.check() in a notebook: the kernel's own
        return kernel["cross_entropy"]
    path = Path(os.environ.get("SUBMISSION", DEFAULT)).resolve()
    spec = importlib.util.spec_from_file_location("student_cross_entropy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cross_entropy


def test_one_loss_by_hand(cross_entropy):
    logits = torch.tensor([[2.0, 0.0, 0.0]])
    expected = -(2.0 - math.log(math.exp(2.0) + 2.0))
    loss = cross_entropy(logits, torch.tensor([0]))
    assert loss.shape == ()
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_reductions_and_shapes(cross_entropy):
    logits, target = torch.randn(4, 5, 3), torch.randint(0, 5, (4, 3))
    per_target = cross_entropy(logits, target, reduction="none")
    assert per_target.shape == (4, 3)
    assert torch.allclose(cross_entropy(logits, target, reduction="sum"), per_target.sum())
    assert torch.allclose(cross_entropy(logits, target), per_target.mean())


def test_ignored_targets_count_for_nothing(cross_entropy):
    logits = torch.randn(4, 5)
    target = torch.tensor([1, -100, 3, -100])
    per_target = cross_entropy(logits, target, reduction="none")
    assert per_target[1] == 0 and per_target[3] == 0
    assert torch.allclose(cross_entropy(logits, target), per_target.sum() / 2)


def test_large_logits_give_a_finite_loss(cross_entropy):
    logits = torch.tensor([[1000.0, 999.0, 0.0]])
    loss = cross_entropy(logits, torch.tensor([1]))
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(1.0 + math.log(1.0 + math.exp(-1.0)), rel=1e-4)


def test_unknown_reduction_raises(cross_entropy):
    with pytest.raises(ValueError):
        cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]), reduction="average")


def test_dtype_gradients_and_inputs(cross_entropy):
    logits = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 3, 1])
    before = logits.detach().clone()
    loss = cross_entropy(logits, target, label_smoothing=0.1)
    assert loss.dtype == torch.float64
    loss.backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
    assert torch.equal(logits.detach(), before)
