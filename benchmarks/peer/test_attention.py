"""The peer pattern's six correctness tests of ``attention(q, k, v, allowed)``.

Plain pytest, run next to the submission (copied in as ``attention.py``), the way a per-run
``docker run ... pytest`` autograder checks one: shape, weights summing to 1, masked weights
zero, an all-masked row raising ValueError, dtype preserved, gradients flowing.
"""

import pytest
import torch
from attention import attention

BATCH, HEADS, QUERIES, KEYS, WIDTH = 2, 4, 16, 16, 32


def inputs(dtype=torch.float32, grad=False):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(BATCH, HEADS, n, WIDTH, generator=generator, dtype=dtype, requires_grad=grad)
        for n in (QUERIES, KEYS, KEYS)
    )
    return q, k, v


def causal():
    return torch.ones(QUERIES, KEYS, dtype=torch.bool).tril()


def test_output_shape():
    q, k, v = inputs()
    output, weights = attention(q, k, v, torch.ones(QUERIES, KEYS, dtype=torch.bool))
    assert output.shape == (BATCH, HEADS, QUERIES, WIDTH)
    assert weights.shape == (BATCH, HEADS, QUERIES, KEYS)


def test_weights_sum_to_one():
    _, weights = attention(*inputs(), causal())
    torch.testing.assert_close(weights.sum(-1), torch.ones(BATCH, HEADS, QUERIES))


def test_masked_weights_are_zero():
    allowed = causal()
    _, weights = attention(*inputs(), allowed)
    assert torch.all(weights[..., ~allowed] == 0)


def test_all_masked_row_raises():
    allowed = causal()
    allowed[3] = False
    with pytest.raises(ValueError):
        attention(*inputs(), allowed)


def test_dtype_preserved():
    for dtype in (torch.float32, torch.float64):
        output, weights = attention(*inputs(dtype), causal())
        assert output.dtype == weights.dtype == dtype


def test_gradients_flow():
    q, k, v = inputs(torch.float64, grad=True)
    output, _ = attention(q, k, v, causal())
    output.sum().backward()
    for tensor in (q, k, v):
        assert tensor.grad is not None and torch.isfinite(tensor.grad).all()
        assert tensor.grad.abs().sum() > 0
