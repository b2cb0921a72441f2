"""Tensor and outcome comparison: tolerances, NaN evidence, gradients, mutation."""

from __future__ import annotations

import torch

from grader.compare import grads_equivalent, mutated_inputs, tensors_close, tolerance
from grader.outcomes import Forward


def test_float32_rounding_is_tolerated_but_a_real_difference_is_not() -> None:
    x = torch.randn(4, 5)
    assert tensors_close(x + 1e-6, x)
    assert not tensors_close(x + 1e-2, x)


def test_float64_tolerance_is_tighter_than_float32() -> None:
    assert tolerance(torch.float64)[0] < tolerance(torch.float32)[0]
    x = torch.randn(3, dtype=torch.float64)
    assert not tensors_close(x + 1e-5, x)


def test_values_are_compared_across_float_dtypes() -> None:
    x = torch.randn(3, 3, dtype=torch.float64)
    assert tensors_close(x.float(), x)


def test_the_tolerance_is_the_expected_dtypes_never_the_returned_ones() -> None:
    # A float16 answer to a float32 question: float16's rounding (about 5e-4 relative) is over
    # float32's tolerance, so half precision is no way to a looser comparison.
    expected = torch.linspace(0.5, 4.0, 64)
    assert not tensors_close(expected.half(), expected)
    assert tensors_close(expected.half(), expected.half())
    # ... and an answer off by 1 % passes nowhere at float32, whatever dtype it comes in.
    off = expected * 1.01
    assert not tensors_close(off.half(), expected)
    assert not tensors_close(off.bfloat16(), expected)
    # A float32 answer to a float64 question (already dtype-changed) is held to float32's
    # tolerance, never a looser one: float32 rounding passes on every seed, a real error fails.
    precise = torch.linspace(0.5, 4.0, 64, dtype=torch.float64)
    assert tensors_close((precise * (1 + 1e-6)).float(), precise)
    assert not tensors_close((precise * (1 + 1e-3)).float(), precise)
    assert not tensors_close((precise * (1 + 1e-3)).half(), precise)
    # The same values in the question's own dtype are held to float64's tolerance.
    assert not tensors_close(precise * (1 + 1e-5), precise)


def test_shapes_must_agree() -> None:
    assert not tensors_close(torch.zeros(2, 3), torch.zeros(3, 2))


def test_nan_in_the_student_output_never_matches_a_finite_reference() -> None:
    x = torch.randn(2, 2)
    y = x.clone()
    y[0, 0] = float("nan")
    assert not tensors_close(y, x)


def test_nan_in_a_variant_is_a_wildcard_only_when_the_rest_is_informative() -> None:
    variant = torch.randn(4, 3)
    variant[0] = float("nan")
    student = variant.clone()
    student[0] = 0.0  # e.g. a student who replaced NaN by zeros
    assert tensors_close(student, variant, nan_is_wildcard=True)
    assert not tensors_close(student, variant)

    all_nan = torch.full((4, 3), float("nan"))
    assert not tensors_close(torch.zeros(4, 3), all_nan, nan_is_wildcard=True)
    assert tensors_close(all_nan.clone(), all_nan, nan_is_wildcard=True)


def test_missing_gradient_equals_zero_gradient() -> None:
    assert grads_equivalent(None, torch.zeros(3))
    assert not grads_equivalent(None, torch.ones(3))
    assert grads_equivalent(torch.ones(3), torch.ones(3))


def test_gradients_through_float32_are_judged_at_float32_precision() -> None:
    exact = torch.randn(5, dtype=torch.float64)
    rounded = exact.float().double()
    assert not grads_equivalent(rounded + 1e-6, exact)
    assert grads_equivalent(rounded + 1e-6, exact, precision=torch.float32)


def test_mutated_inputs_are_found_by_position() -> None:
    inputs = {"q": torch.ones(2), "mask": torch.tensor([True, False])}
    forward = Forward(status="ok", after={"arg0": torch.ones(2) * 2,
                                          "arg1": torch.tensor([True, False])})
    assert mutated_inputs(forward, inputs, {"arg0": "q", "arg1": "mask"}) == ["arg0"]
