"""Public tests for `ManualMultiHeadAttention` with RoPE and a KV cache: run `pytest public_tests/`
(set SUBMISSION=path/to/attention_kv_cache.py to test your own file; by default the starter)."""

import importlib.util
import os
import types
from pathlib import Path

import pytest
import torch

DEFAULT = Path(__file__).resolve().parent.parent / "starter" / "attention_kv_cache.py"
B, T, D, H = 2, 6, 16, 2


@pytest.fixture(scope="module")
def student(pytestconfig):
    kernel = getattr(pytestconfig, "autograde_namespace", None)
    if kernel is not None:  # run by autograde.check() in a notebook: the kernel's own names
        return types.SimpleNamespace(**kernel)
    path = Path(os.environ.get("SUBMISSION", DEFAULT)).resolve()
    spec = importlib.util.spec_from_file_location("student_attention_kv_cache", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(student, **kwargs):
    torch.manual_seed(0)
    return student.ManualMultiHeadAttention(D, H, **kwargs).eval()


def x(t=T, seed=0):
    return torch.randn(B, t, D, generator=torch.Generator().manual_seed(seed))


def test_odd_head_width_with_rope_raises_value_error(student):
    with pytest.raises(ValueError):
        student.ManualMultiHeadAttention(12, 4, use_rope=True)


def test_use_cache_returns_output_and_cache(student):
    out, cache = build(student, use_rope=True)(x(), causal=True, use_cache=True)
    assert out.shape == (B, T, D)
    assert cache.key.shape == cache.value.shape == (B, H, T, D // H)
    assert cache.key_padding_mask.shape == (B, T) and cache.key_padding_mask.dtype == torch.bool


def test_decoding_one_token_at_a_time_matches_one_causal_pass(student):
    module = build(student, use_rope=True)
    sequence = x()
    whole = module(sequence, causal=True)
    cache, steps = None, []
    for t in range(T):
        out, cache = module(sequence[:, t:t + 1], causal=True, use_cache=True, cache=cache)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole)


def test_rope_leaves_values_alone_for_a_single_key(student):
    # With one key every query gives it all the weight: the output is out_proj(v_proj(key)),
    # whatever the positions, if only queries and keys are rotated.
    module = build(student, use_rope=True)
    query, key = x(3), x(1, seed=1)
    near = module(query, key, query_position_offset=0, key_position_offset=0)
    far = module(query, key, query_position_offset=7, key_position_offset=5)
    torch.testing.assert_close(near, far)


def test_padded_queries_output_zero(student):
    module = build(student)
    real = torch.ones(B, T, dtype=torch.bool)
    real[1, -2:] = False
    out = module(x(), query_padding_mask=real)
    assert torch.equal(out[1, -2:], torch.zeros_like(out[1, -2:]))
    assert out[0].abs().sum() > 0


def test_misuse_raises_value_error(student):
    module = build(student, use_rope=True)
    _, cache = module(x(3), causal=True, use_cache=True)
    with pytest.raises(ValueError):
        module(x(1), cache=cache)  # use_cache=False
    with pytest.raises(ValueError):
        module(x(1), x(4, seed=1), cache=cache, use_cache=True)  # cross-attention
    with pytest.raises(ValueError):
        module(x(1), cache=cache, use_cache=True, query_position_offset=0)
    training = build(student, dropout=0.5).train()
    with pytest.raises(ValueError):
        training(x(), use_cache=True)
