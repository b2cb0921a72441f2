"""The ``raises-value-error`` check on made-up outcomes: a ValueError earns the check only where
it tells invalid input from valid, not where the code raises it on every input."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from assignments import CheckSpec, ProbeCall, ProbePlan
from grader.checks import CheckContext, check_kinds, judge
from grader.diagnosis import with_defining_checks
from grader.outcomes import CallOutcome, Forward, Frame, Raised

ROW_CHECK = (Frame("mha.py", 40, "forward", 'raise ValueError("a query has no key")'),)
WIDTH_CHECK = (Frame("mha.py", 12, "forward", 'raise ValueError("bad query width")'),)
REJECTED = "bad"
"""The one call whose input the contract rejects (the reference raises ValueError)."""


def _returned(call_id: str) -> CallOutcome:
    return CallOutcome(call_id, "ok", (Forward("ok", structure="tensor",
                                               outputs=(torch.zeros(2, 3),)),))


def _raised(call_id: str, frames: tuple[Frame, ...], message: str = "no") -> CallOutcome:
    return CallOutcome(call_id, "raised", (Forward(
        "raised", Raised("ValueError", True, message, frames)),))


def _verdict(valid: list[CallOutcome], student_on_rejected: CallOutcome) -> tuple[bool, str]:
    """The check on the rejected call, the student's valid calls as given."""
    calls = (*(ProbeCall(o.id, {}, "self", f"valid input {o.id}") for o in valid),
             ProbeCall(REJECTED, {}, "rejects", "a query with no allowed key"))
    plan = ProbePlan(seed=0, entry="mha.py", calls=calls, inputs={}, forbidden=(),
                     call_timeout=1.0, run_seconds=1.0, memory_bytes=0)
    reference = {o.id: _returned(o.id) for o in valid}
    reference[REJECTED] = _raised(REJECTED, (), "the reference's check")
    context = CheckContext(plan=plan, student={**{o.id: o for o in valid},
                                               REJECTED: student_on_rejected},
                           reference=reference)
    check = CheckSpec("2.9", "rejects a query with no key", "raises-value-error", (REJECTED,), 1)
    verdict = judge(check, context, check_kinds())
    return verdict.passed, verdict.observation


_valid_counts = st.integers(min_value=1, max_value=6)


@given(count=_valid_counts, shapes_in_message=st.booleans())
def test_a_value_error_raised_on_every_valid_input_earns_nothing(
        count: int, shapes_in_message: bool) -> None:
    valid = [_raised(f"v{i}", WIDTH_CHECK, f"width {i}" if shapes_in_message else "width")
             for i in range(count)]
    passed, observation = _verdict(valid, _raised(REJECTED, WIDTH_CHECK, "width 9"))
    assert not passed
    assert "on valid input too" in observation and "valid input v0" in observation


@given(raising=st.lists(st.booleans(), min_size=1, max_size=6).filter(lambda r: not all(r)))
def test_a_validation_that_also_rejects_some_valid_input_still_earns_the_check(
        raising: list[bool]) -> None:
    """A strict causal triangle leaves row 0 no key, and the row check rightly raises there:
    the code still returns on other valid input, so the check tells them apart."""
    valid = [_raised(f"v{i}", ROW_CHECK) if raises else _returned(f"v{i}")
             for i, raises in enumerate(raising)]
    assert _verdict(valid, _raised(REJECTED, ROW_CHECK)) == (True, "")


@given(count=_valid_counts)
def test_a_validation_before_a_crash_elsewhere_earns_the_check(count: int) -> None:
    """Every valid call raises, but from other lines than the rejection: the validation works."""
    valid = [_raised(f"v{i}", WIDTH_CHECK) for i in range(count)]
    assert _verdict(valid, _raised(REJECTED, ROW_CHECK)) == (True, "")


def test_returning_on_rejected_input_still_fails() -> None:
    passed, observation = _verdict([_returned("v0")], _returned(REJECTED))
    assert not passed and "returned normally" in observation


def test_a_validation_failed_for_rejecting_everything_is_a_runtime_error() -> None:
    """Its call matched the reference (both raised): no other finding covers it, so the failed
    check is told as the code's error rather than left to wrong-output."""
    plan = ProbePlan(seed=0, entry="mha.py", calls=(ProbeCall(REJECTED, {}, "rejects", "x"),),
                     inputs={}, forbidden=(), call_timeout=1.0, run_seconds=1.0, memory_bytes=0)
    findings = with_defining_checks([], plan, [("raises-value-error", (REJECTED,)),
                                               ("matches-reference", ())])
    assert [(f.code, f.calls) for f in findings] == [("runtime-error", (REJECTED,))]
