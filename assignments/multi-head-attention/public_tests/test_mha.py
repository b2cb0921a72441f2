"""Public tests for `ManualMultiHeadAttention`: run `pytest public_tests/` (set
SUBMISSION=path/to/mha.py to test your own file; by default the starter is tested)."""

import importlib.util
import os
from pathlib import Path

import pytest
import torch
from torch import nn

DEFAULT = Path(__file__).resolve().parent.parent / "starter" / "mha.py"
B, T, TK, D, H = 2, 5, 7, 12, 3


@pytest.fixture(scope="module")
def mha_class(pytestconfig):
    kernel = getattr(pytestconfig, "autograde_namespace", None)
    if kernel is not None:  # run by autograde.check() in a notebook: the kernel's own
        return kernel["ManualMultiHeadAttention"]
    path = Path(os.environ.get("SUBMISSION", DEFAULT)).resolve()
    spec = importlib.util.spec_from_file_location("student_mha", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ManualMultiHeadAttention


def build(mha_class, *, dropout=0.0, bias=True, dtype=torch.float32):
    torch.manual_seed(0)
    module = mha_class(D, H, dropout=dropout, bias=bias).to(dtype)
    return module.eval()


def x(t=T, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, t, D, generator=g).to(dtype)


def test_has_the_four_projections(mha_class):
    for bias in (True, False):
        module = build(mha_class, bias=bias)
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            layer = getattr(module, name)
            assert isinstance(layer, nn.Linear), f"{name} must be an nn.Linear"
            assert layer.weight.shape == (D, D)
            assert (layer.bias is not None) == bias


def test_d_model_not_divisible_by_num_heads_raises_value_error(mha_class):
    with pytest.raises(ValueError):
        mha_class(10, 3)


def test_self_attention_shape(mha_class):
    out = build(mha_class)(x())
    assert isinstance(out, torch.Tensor), "forward returns one tensor"
    assert out.shape == (B, T, D)


def test_cross_attention_uses_key_value(mha_class):
    module = build(mha_class)
    query, kv = x(), x(TK, seed=1)
    out = module(query, kv)
    assert out.shape == (B, T, D)
    kv2 = kv.clone()
    kv2[:, 0] += 3.0
    assert not torch.allclose(out, module(query, kv2)), "the output ignores key_value"


def test_padded_keys_do_not_influence_the_output(mha_class):
    module = build(mha_class)
    query, kv = x(), x(TK, seed=1)
    padding = torch.ones(B, TK, dtype=torch.bool)
    padding[0, -2:] = False
    padding[1, -4:] = False
    out = module(query, kv, key_padding_mask=padding)
    kv2 = kv.clone()
    kv2[~padding] = 100.0
    torch.testing.assert_close(out, module(query, kv2, key_padding_mask=padding))


@pytest.mark.parametrize("shape", [(T, T), (B, T, T), (1, H, T, T), (B, 1, T, T)])
def test_attention_mask_blocks_keys(mha_class, shape):
    module = build(mha_class)
    query = x()
    mask = torch.ones(shape, dtype=torch.bool)
    mask[..., 3] = False  # no query may look at position 3
    out = module(query, attention_mask=mask)
    # Changing position 3 can only change the output of query 3 itself.
    query2 = query.clone()
    query2[:, 3] += 5.0
    out2 = module(query2, attention_mask=mask)
    keep = [0, 1, 2, 4]
    torch.testing.assert_close(out[:, keep], out2[:, keep])


def test_causal_output_does_not_depend_on_later_positions(mha_class):
    module = build(mha_class)
    query = x(6)
    out = module(query, causal=True)
    query2 = query.clone()
    query2[:, 3:] = torch.randn(B, 3, D)
    torch.testing.assert_close(out[:, :3], module(query2, causal=True)[:, :3])


def test_causal_first_position_attends_to_itself(mha_class):
    module = build(mha_class)
    query = x(6)
    # With causal=True, position 0 sees exactly itself: the same as a length-1 sequence.
    torch.testing.assert_close(module(query, causal=True)[:, :1], module(query[:, :1]))


def test_query_without_allowed_key_raises_value_error(mha_class):
    module = build(mha_class)
    query, kv = x(), x(TK, seed=1)
    padding = torch.ones(B, TK, dtype=torch.bool)
    padding[1] = False
    with pytest.raises(ValueError):
        module(query, kv, key_padding_mask=padding)
    mask = torch.ones(T, T, dtype=torch.bool)
    mask[2] = False
    with pytest.raises(ValueError):
        module(x(), attention_mask=mask)


def test_dropout_only_in_training_mode(mha_class):
    module = build(mha_class, dropout=0.5)
    query = x()
    torch.manual_seed(1)
    first = module(query)
    torch.manual_seed(2)
    torch.testing.assert_close(first, module(query), msg="eval() output must be deterministic")
    module.train()
    torch.manual_seed(1)
    trained = module(query)
    assert not torch.allclose(first, trained), "dropout has no effect in training mode"


def test_float64_module_gives_float64_output(mha_class):
    module = build(mha_class, dtype=torch.float64)
    assert module(x(dtype=torch.float64)).dtype == torch.float64


def test_gradients_reach_inputs_and_projections(mha_class):
    module = build(mha_class, dtype=torch.float64)
    query = x(dtype=torch.float64).requires_grad_(True)
    kv = x(TK, seed=1, dtype=torch.float64).requires_grad_(True)
    out = module(query, kv)
    assert out.requires_grad, "the output is not connected to the inputs"
    (out * torch.linspace(-1, 1, D, dtype=out.dtype)).sum().backward()
    for name, tensor in [("query", query), ("key_value", kv)] + [
        (f"{p}.weight", getattr(module, p).weight)
        for p in ("q_proj", "k_proj", "v_proj", "out_proj")
    ]:
        assert tensor.grad is not None, f"no gradient reached {name}"
        assert tensor.grad.abs().sum() > 0, f"the gradient of {name} is all zeros"


def test_inputs_are_not_modified(mha_class):
    module = build(mha_class)
    query, kv = x(), x(TK, seed=1)
    padding = torch.ones(B, TK, dtype=torch.bool)
    padding[0, -2:] = False
    mask = torch.ones(T, TK, dtype=torch.bool)
    mask[:, 1] = False
    args = (query, kv, padding, mask)
    copies = [t.clone() for t in args]
    module(query, kv, key_padding_mask=padding, attention_mask=mask, causal=True)
    for before, after in zip(copies, args, strict=True):
        assert before.shape == after.shape and torch.equal(before, after)
