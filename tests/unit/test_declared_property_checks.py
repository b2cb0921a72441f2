"""Property checks that name their own code (``code`` in a check of ``assignment.toml``): the
``forwards-agree`` kind, and what its failure is put down to."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from assignments import CheckSpec, ProbeCall, ProbePlan
from grader.checks import CheckContext, check_kinds, judge
from grader.diagnosis import with_defining_checks
from grader.findings import Finding
from grader.outcomes import CallOutcome, Forward, Raised

FAR = "far"
OTHER = "other"
FINE = "fine"
AGREE = CheckSpec("3.14", "far positions agree", "forwards-agree", (FAR,), 0.25,
                  code="positions-limited")


def _plan() -> ProbePlan:
    calls = (ProbeCall(FAR, {}, "far", "offsets 0, then 10000", compare="property",
                       meta={"later": "at offset 10000", "agree_within": 0.03}),
             ProbeCall(OTHER, {}, "cache", "a prefill, then a token"),
             ProbeCall(FINE, {}, "plain", "one sequence"))
    return ProbePlan(seed=0, entry="m.py", calls=calls, inputs={}, forbidden=(),
                     call_timeout=1.0, run_seconds=1.0, memory_bytes=0)


def _forward(output: torch.Tensor) -> Forward:
    return Forward("ok", structure="tensor", outputs=(output,))


def _crash() -> Forward:
    return Forward("raised", Raised("IndexError", False, "index 10000 is out of bounds", ()))


def _judged(*forwards: Forward) -> tuple[bool, str]:
    plan = _plan()
    first = forwards[0]
    reference = CallOutcome(FAR, "ok", (first, first))
    student = CallOutcome(FAR, "ok" if all(f.status == "ok" for f in forwards) else "raised",
                          forwards)
    context = CheckContext(plan=plan, student={FAR: student}, reference={FAR: reference})
    verdict = judge(AGREE, context, check_kinds())
    return verdict.passed, verdict.observation


@given(drift=st.floats(min_value=0.0, max_value=0.029))
def test_forwards_within_the_stated_distance_agree(drift: float) -> None:
    output = torch.linspace(-1, 1, 12).reshape(2, 6)
    assert _judged(_forward(output), _forward(output + drift)) == (True, "")


@given(moved=st.floats(min_value=0.031, max_value=10.0))
def test_forwards_farther_apart_fail_and_say_where(moved: float) -> None:
    output = torch.zeros(2, 6)
    passed, observation = _judged(_forward(output), _forward(output + moved))
    assert not passed
    assert "at offset 10000 differ from those of the first forward" in observation


def test_a_later_forward_that_raises_fails() -> None:
    passed, observation = _judged(_forward(torch.zeros(2, 6)), _crash())
    assert not passed and "IndexError" in observation


def _declared(findings: list[Finding]) -> list[tuple[str, tuple[str, ...]]]:
    result = with_defining_checks(findings, _plan(), [("forwards-agree", (FAR,))],
                                  declared=[("positions-limited", (FAR,))])
    return sorted((f.code, f.calls) for f in result)


def test_a_crash_on_the_property_call_is_the_declared_code_not_a_runtime_error() -> None:
    findings = [Finding("runtime-error", (FAR,), "IndexError: out of bounds")]
    assert _declared(findings) == [("positions-limited", (FAR,))]


def test_a_failed_property_alone_is_the_declared_code() -> None:
    assert _declared([]) == [("positions-limited", (FAR,))]


def test_a_failed_property_beside_a_known_mistake_is_put_down_to_it() -> None:
    """Rotating the values too also moves the outputs with the offset: no second code."""
    findings = [Finding("rope-on-values", (OTHER,), mistake="rope-on-values")]
    assert _declared(findings) == [("rope-on-values", (OTHER, FAR))]


def test_a_crash_elsewhere_stays_a_runtime_error() -> None:
    findings = [Finding("runtime-error", (OTHER, FAR), "IndexError: out of bounds")]
    assert _declared(findings) == [("positions-limited", (FAR,)), ("runtime-error", (OTHER,))]


def test_a_crash_on_every_call_is_a_runtime_error_and_nothing_else() -> None:
    """A starter handed in as shipped raises everywhere: no call says anything of positions."""
    findings = [Finding("runtime-error", (OTHER, FINE, FAR), "NotImplementedError")]
    assert _declared(findings) == [("runtime-error", (OTHER, FINE, FAR))]
