"""Public tests for `attention`: run `pytest public_tests/` (set SUBMISSION=path/to/attention.py
to test your own file; by default the starter is tested)."""

import importlib.util
import math
import os
from pathlib import Path

import pytest
import torch

DEFAULT = Path(__file__).resolve().parent.parent / "starter" / "attention.py"


@pytest.fixture(scope="module")
def attention(pytestconfig):
    kernel = getattr(pytestconfig, "autograde_namespace", None)
    if kernel is not None:  # run by autograde.check() in a notebook: the kernel's own
        return kernel["attention"]
    path = Path(os.environ.get("SUBMISSION", DEFAULT)).resolve()
    spec = importlib.util.spec_from_file_location("student_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention


def inputs(*lead, t=4, s=6, d=8, dv=5, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, t, d, generator=g, dtype=dtype)
    k = torch.randn(*lead, s, d, generator=g, dtype=dtype)
    v = torch.randn(*lead, s, dv, generator=g, dtype=dtype)
    return q, k, v


def some_blocked(t, s, seed=1):
    """A mask with a blocked key in every row but never a fully blocked row."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(t, s, generator=g) < 0.5
    mask[torch.arange(t), torch.arange(t) % s] = True
    mask[torch.arange(t), (torch.arange(t) + 1) % s] = False
    return mask


def test_returns_output_and_weights_with_the_right_shapes(attention):
    q, k, v = inputs(2, 3)
    result = attention(q, k, v, torch.ones(4, 6, dtype=torch.bool))
    assert isinstance(result, tuple) and len(result) == 2, "return (output, weights)"
    output, weights = result
    assert output.shape == (2, 3, 4, 5)
    assert weights.shape == (2, 3, 4, 6)


def test_small_example_by_hand(attention):
    # D = 4, so the scores are divided by sqrt(4) = 2: the first key scores 4 / 2 = 2, the second 0.
    q = torch.tensor([[2.0, 0.0, 0.0, 0.0]])
    k = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    v = torch.tensor([[1.0], [0.0]])
    output, weights = attention(q, k, v, torch.ones(1, 2, dtype=torch.bool))
    expected = math.exp(2) / (math.exp(2) + 1)
    assert weights[0, 0].item() == pytest.approx(expected, rel=1e-5)
    assert weights[0, 1].item() == pytest.approx(1 - expected, rel=1e-5)
    assert output[0, 0].item() == pytest.approx(expected, rel=1e-5)


def test_weights_sum_to_one_over_the_keys(attention):
    q, k, v = inputs(3)
    _, weights = attention(q, k, v, some_blocked(4, 6))
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(3, 4))


def test_blocked_keys_get_exactly_zero_weight(attention):
    q, k, v = inputs(3)
    mask = some_blocked(4, 6)
    _, weights = attention(q, k, v, mask)
    assert torch.all(weights[..., ~mask] == 0)
    assert torch.all(weights[..., mask] > 0)


def test_blocked_keys_do_not_influence_the_output(attention):
    q, k, v = inputs(2)
    mask = some_blocked(4, 6)
    mask[:, -1] = False  # nobody may look at the last key
    output, _ = attention(q, k, v, mask)
    k2, v2 = k.clone(), v.clone()
    k2[:, -1] += 10.0
    v2[:, -1] -= 10.0
    output2, _ = attention(q, k2, v2, mask)
    torch.testing.assert_close(output, output2)


def test_mask_broadcasts_over_batch_and_heads(attention):
    q, k, v = inputs(2, 3)
    per_batch = some_blocked(4, 6).expand(2, 1, 4, 6).clone()
    per_batch[1] = True
    _, weights = attention(q, k, v, per_batch)
    assert weights.shape == (2, 3, 4, 6)
    assert torch.all(weights[0][:, ~per_batch[0, 0]] == 0)
    assert torch.all(weights[1] > 0)


def test_causal_mask_output_does_not_depend_on_later_positions(attention):
    q, k, v = inputs(2, t=5, s=5)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    output, _ = attention(q, k, v, causal)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    q2[:, 3:] = 0.0
    k2[:, 3:] = 5.0
    v2[:, 3:] = -5.0
    output2, _ = attention(q2, k2, v2, causal)
    torch.testing.assert_close(output[:, :3], output2[:, :3])


def test_row_without_allowed_key_raises_value_error(attention):
    q, k, v = inputs(2)
    mask = some_blocked(4, 6)
    mask[2] = False
    with pytest.raises(ValueError):
        attention(q, k, v, mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_output_dtype_equals_input_dtype(attention, dtype):
    q, k, v = inputs(2, dtype=dtype)
    output, weights = attention(q, k, v, some_blocked(4, 6))
    assert output.dtype == dtype
    assert weights.dtype == dtype


def test_inputs_are_not_modified(attention):
    q, k, v = inputs(2)
    mask = some_blocked(4, 6)
    copies = [t.clone() for t in (q, k, v, mask)]
    attention(q, k, v, mask)
    for before, after in zip(copies, (q, k, v, mask), strict=True):
        assert torch.equal(before, after)


def test_gradients_reach_q_k_and_v(attention):
    q, k, v = (t.requires_grad_(True) for t in inputs(2, dtype=torch.float64))
    output, _ = attention(q, k, v, some_blocked(4, 6))
    assert output.requires_grad, "the output is not connected to q, k and v"
    (output * torch.linspace(-1, 1, output.shape[-1], dtype=output.dtype)).sum().backward()
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        assert tensor.grad is not None, f"no gradient reached {name}"
        assert tensor.grad.abs().sum() > 0, f"the gradient of {name} is all zeros"
