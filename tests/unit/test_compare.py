"""Tensor and outcome comparison: tolerances, NaN evidence, gradients, mutation."""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from grader.compare import (
    call_departure,
    calls_match,
    grads_equivalent,
    mutated_inputs,
    tensor_departure,
    tensors_close,
    tolerance,
)
from grader.outcomes import CallOutcome, Forward, Raised


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


_FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(expected=st.lists(_FINITE, min_size=1, max_size=8), data=st.data(),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       margin=st.floats(min_value=0.01, max_value=1e4))
def test_departure_is_the_least_margin_at_which_tensors_are_close(
        expected: list[float], data: st.DataObject, dtype: torch.dtype, margin: float) -> None:
    noise = data.draw(st.lists(st.floats(min_value=-1e3, max_value=1e3), min_size=len(expected),
                               max_size=len(expected)))
    want = torch.tensor(expected, dtype=torch.float64).to(dtype)
    scale = torch.tensor(noise, dtype=torch.float64) * tolerance(dtype)[0]
    got = (want.double() + scale).to(dtype)
    departure = tensor_departure(got, want)
    if departure < margin * (1 - 1e-6):
        assert tensors_close(got, want, margin=margin)
    if departure > margin * (1 + 1e-6):
        assert not tensors_close(got, want, margin=margin)


def test_departure_is_infinite_where_no_margin_makes_tensors_close() -> None:
    x = torch.randn(3, 4)
    assert tensor_departure(x, x.clone()) == 0.0
    assert tensor_departure(x, x[:2]) == math.inf
    assert tensor_departure(x.isnan() | True, x > 0) == math.inf
    nan = x.clone()
    nan[0, 0] = math.nan
    assert tensor_departure(nan, x) == math.inf and tensor_departure(x, nan) == math.inf
    inf = x.clone()
    inf[1, 1] = math.inf
    assert tensor_departure(inf, inf.clone()) == 0.0
    assert tensor_departure(-inf, inf) == math.inf
    assert tensor_departure(None, None) == 0.0 and tensor_departure(x, None) == math.inf


def test_call_departure_counts_in_tolerances_and_a_lone_raise_as_infinite() -> None:
    x = torch.ones(4, dtype=torch.float64)
    atol, rtol = tolerance(torch.float64)

    def call(*outputs: torch.Tensor, raised: Raised | None = None) -> CallOutcome:
        forward = Forward("ok" if raised is None else "raised", raised, outputs=outputs)
        return CallOutcome("c", "ok", (forward,))

    moved = call(x + 5 * (atol + rtol))
    assert abs(call_departure(moved, call(x)) - 5) < 1e-6
    assert not calls_match(moved, call(x), margin=4.9) and calls_match(moved, call(x), margin=5.1)
    error = Raised("ValueError", True, "no key")
    assert call_departure(call(raised=error), call(raised=error)) == 0.0
    assert call_departure(call(raised=error), call(x)) == math.inf
