"""Comparing outcomes: tensors within a dtype-aware tolerance, forwards, whole calls. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from grader.outcomes import CallOutcome, Forward

# (absolute, relative) tolerance by the dtype the question asked for. Students compute the
# same function in many orders (einsum, loops, manual softmax); these absorb rounding but not
# any known mistake, which moves outputs by orders of magnitude more on the probe inputs.
_TOLERANCES = {
    torch.float64: (1e-7, 1e-6),
    torch.float32: (2e-4, 2e-4),
}
_COARSE = (5e-2, 5e-2)
# How far beyond the tolerance a departure must go to be evidence of a mistake. The probes are
# designed so that every known mistake moves outputs by 0.1 or more (thousands of tolerances);
# a variant that moves a call by less than this margin cannot be told from the reference there,
# so that call neither names nor rules out the mistake, whatever the seed drew.
EVIDENCE_MARGIN = 20.0


def tolerance(expected: torch.dtype) -> tuple[float, float]:
    """The tolerance of an answer to a question in ``expected``'s dtype.

    Never the dtype the student returned: a float16 answer to a float32 question is held to
    float32's tolerance (and is ``dtype-changed``), so half precision cannot buy looseness.
    """
    return _TOLERANCES.get(expected, _COARSE)


def max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference, ignoring dtype; infinity when shapes differ or NaN appears."""
    if a.shape != b.shape:
        return float("inf")
    difference = (a.double() - b.double()).abs()
    if difference.numel() == 0:
        return 0.0
    if torch.isnan(difference).any():
        return float("inf")
    return float(difference.max())


def tensors_close(actual: torch.Tensor | None, expected: torch.Tensor | None,
                  *, nan_is_wildcard: bool = False, precision: torch.dtype | None = None,
                  margin: float = 1.0) -> bool:
    """Whether ``actual`` equals ``expected`` within tolerance, whatever their float dtypes.

    With ``nan_is_wildcard``, positions where ``expected`` is NaN match anything: a variant
    that produces NaN there stands for every student who put garbage in that row.
    The tolerance is ``expected``'s dtype's; ``precision`` overrides that dtype (values
    computed in float32 and handed back as float64 carry float32's rounding). An answer in
    another dtype than the question's is ``dtype-changed`` (its own check, charged once); its
    values are judged at float32's precision when the question was float64, and at the
    question's own otherwise, so a lower precision never buys more than float32's tolerance
    and a float32 answer to a float64 question gets the same verdict on every seed.
    """
    if actual is None or expected is None:
        return actual is None and expected is None
    if actual.shape != expected.shape:
        return False
    if actual.dtype == torch.bool or expected.dtype == torch.bool:
        return actual.dtype == expected.dtype and bool(torch.equal(actual, expected))
    if precision is None and actual.dtype != expected.dtype:
        precision = torch.float32 if expected.dtype == torch.float64 else expected.dtype
    atol, rtol = tolerance(precision or expected.dtype)
    atol, rtol = atol * margin, rtol * margin
    a, e = actual.double(), expected.double()
    if nan_is_wildcard:
        care = ~torch.isnan(e)
        if int(care.sum()) * 2 >= care.numel():
            a, e = a[care], e[care]
        # else: a mostly-NaN variant output is evidence only for a mostly-NaN student output,
        # so NaN must then match NaN exactly.
        return bool(torch.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True))
    return bool(torch.allclose(a, e, atol=atol, rtol=rtol, equal_nan=False))


def tensor_departure(actual: torch.Tensor | None, expected: torch.Tensor | None) -> float:
    """How far ``actual`` stands from ``expected``, in tolerances of ``expected``'s dtype: the
    smallest ``margin`` at which ``tensors_close`` holds (infinity where none does: another
    shape, NaN, a different boolean; 0 for equal tensors). What a probe can show of a change."""
    if actual is None or expected is None:
        return 0.0 if actual is None and expected is None else float("inf")
    if actual.shape != expected.shape:
        return float("inf")
    if actual.dtype == torch.bool or expected.dtype == torch.bool:
        same = actual.dtype == expected.dtype and bool(torch.equal(actual, expected))
        return 0.0 if same else float("inf")
    precision = expected.dtype
    if actual.dtype != expected.dtype:
        precision = torch.float32 if expected.dtype == torch.float64 else expected.dtype
    atol, rtol = tolerance(precision)
    a, e = actual.double(), expected.double()
    if a.numel() == 0:
        return 0.0
    if bool(torch.isnan(a).any() or torch.isnan(e).any()) or not bool(
            torch.equal(torch.isinf(a), torch.isinf(e))):
        return float("inf")
    finite = torch.isfinite(e)
    if not bool(torch.equal(a[~finite], e[~finite])):
        return float("inf")
    a, e = a[finite], e[finite]
    if a.numel() == 0:
        return 0.0
    return float(((a - e).abs() / (atol + rtol * e.abs())).max())


def grads_equivalent(actual: torch.Tensor | None, expected: torch.Tensor | None,
                     *, precision: torch.dtype | None = None) -> bool:
    """Gradients match ``expected`` (NaN there matches anything); missing equals all-zero."""
    if actual is None and expected is None:
        return True
    reference = expected if expected is not None else actual
    assert reference is not None
    zeros = torch.zeros_like(reference)
    return tensors_close(
        actual if actual is not None else zeros, expected if expected is not None else zeros,
        nan_is_wildcard=True, precision=precision,
    )


def is_zero(tensor: torch.Tensor | None) -> bool:
    return tensor is None or not bool(tensor.abs().gt(0).any())


@dataclass(frozen=True)
class ForwardMatch:
    """How one forward of the code under test relates to one of another implementation."""

    same: bool
    reason: str = ""


def forwards_match(actual: Forward, expected: Forward, *, nan_is_wildcard: bool = False,
                   exact_outputs: bool = True, margin: float = 1.0) -> ForwardMatch:
    """Whether two forwards behaved alike: both raised ValueError, or returned the same values."""
    if actual.raised is not None or expected.raised is not None:
        # Raising ValueError is the contract's answer; any other exception matches only the
        # same exception (a known mistake can crash, e.g. a per-head mask without heads).
        same = (actual.raised is not None and expected.raised is not None and (
            actual.raised.value_error == expected.raised.value_error
            and (actual.raised.value_error or actual.raised.type == expected.raised.type)))
        return ForwardMatch(same, "raised")
    if actual.status != "ok" or expected.status != "ok":
        return ForwardMatch(False, "failed")
    if len(actual.outputs) != len(expected.outputs):
        return ForwardMatch(False, "structure")
    if not exact_outputs:
        return ForwardMatch(True)
    for got, want in zip(actual.outputs, expected.outputs, strict=True):
        if not tensors_close(got, want, nan_is_wildcard=nan_is_wildcard, margin=margin):
            return ForwardMatch(False, "values")
    return ForwardMatch(True)


def calls_match(actual: CallOutcome, expected: CallOutcome, *,
                nan_is_wildcard: bool = False, margin: float = 1.0) -> bool:
    """Same behaviour on every forward of a call."""
    if len(actual.forwards) != len(expected.forwards):
        return False
    return all(
        forwards_match(a, e, nan_is_wildcard=nan_is_wildcard, margin=margin).same
        for a, e in zip(actual.forwards, expected.forwards, strict=True)
    )


def call_departure(actual: CallOutcome, expected: CallOutcome) -> float:
    """How far two calls stand apart, in tolerances: the smallest ``margin`` at which
    ``calls_match`` holds (infinity where none does: a raise on one side only, another
    structure). The largest departure over the call's forwards and outputs."""
    if len(actual.forwards) != len(expected.forwards):
        return float("inf")
    worst = 0.0
    for a, e in zip(actual.forwards, expected.forwards, strict=True):
        match = forwards_match(a, e, exact_outputs=False)
        if not match.same:
            return float("inf")
        if match.reason == "raised":
            continue
        for got, want in zip(a.outputs, e.outputs, strict=True):
            worst = max(worst, tensor_departure(got, want))
    return worst


def mutated_inputs(forward: Forward, inputs: Mapping[str, torch.Tensor],
                   positions: Mapping[str, str]) -> list[str]:
    """Positions whose tensor after the call differs from what was handed in (as handed back,
    or as the supervisor saw it)."""
    changed = [position for position in sorted(forward.changed) if position in positions]
    for position, after in forward.after.items():
        key = positions.get(position)
        if key is None or position in changed:
            continue
        original = inputs[key]
        if after.shape != original.shape or after.dtype != original.dtype or not bool(
            torch.equal(after, original)
        ):
            changed.append(position)
    return changed

