"""Interface errors that say something: the expected signature, what the file defines, the
nearest name; a pair returned the other way round."""

from __future__ import annotations

import torch

from grader.checks import structure_problem
from grader.interface import expected_signature, missing_name_detail
from grader.loader import load_assignment
from grader.outcomes import Forward


def test_a_misnamed_function_gets_the_signature_and_the_nearest_name() -> None:
    reference = load_assignment("attention").reference(frozenset())
    files = {"attention.py": b"import torch\n\ndef scaled_attention(q, k, v, allowed):\n"
                             b"    return q, q\n"}
    detail = missing_name_detail("attention", files, "attention.py", reference)
    assert "`attention(q, k, v, allowed)`" in detail
    assert "`scaled_attention`" in detail and "rename it to `attention`" in detail


def test_several_candidates_are_listed_with_the_nearest_one_named() -> None:
    reference = load_assignment("multi-head-attention").reference(frozenset())
    files = {"mha.py": b"class Helper:\n    pass\n\nclass MultiHeadAttention:\n    pass\n"}
    detail = missing_name_detail("ManualMultiHeadAttention", files, "mha.py", reference)
    assert "ManualMultiHeadAttention(d_model, num_heads, *, dropout=0.0, bias=True)" in detail
    assert "forward(query, key_value=None, *, attention_mask=None" in detail
    assert "`Helper`, `MultiHeadAttention`" in detail
    assert "the nearest is `MultiHeadAttention`" in detail
    assert "mistakes" not in detail  # the variants' switch is no part of the contract


def test_a_name_bound_to_something_else_or_nothing_is_said_so() -> None:
    reference = load_assignment("attention").reference(frozenset())
    assert "is a variable, not a function" in missing_name_detail(
        "attention", {"attention.py": b"attention = None\n"}, "attention.py", reference)
    assert "no function at all" in missing_name_detail(
        "attention", {"attention.py": b"x = 1\n"}, "attention.py", reference)
    assert expected_signature("missing", reference) == ""


def test_a_pair_in_the_wrong_order_is_an_interface_error() -> None:
    output, weights = torch.randn(2, 5, 6), torch.softmax(torch.randn(2, 5, 7), dim=-1)
    want = Forward(status="ok", structure="tuple[2]", outputs=(output, weights))
    swapped = Forward(status="ok", structure="tuple[2]", outputs=(weights, output))
    assert "other way round" in (structure_problem(swapped, want) or "")
    square = torch.randn(2, 6, 6), torch.softmax(torch.randn(2, 6, 6), dim=-1)
    want = Forward(status="ok", structure="tuple[2]", outputs=square)
    swapped = Forward(status="ok", structure="tuple[2]", outputs=square[::-1])
    assert "other way round" in (structure_problem(swapped, want) or "")
    assert structure_problem(want, want) is None
