"""The mistake search on made-up outcomes: when a raise the student shares with a variant is
that variant's mistake, and when it is the student's code failing on every input."""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from assignments import KnownMistake, ProbeCall, ProbePlan
from grader.diagnosis import DiagnosisInput, diagnose
from grader.mistake_search import Hypothesis
from grader.outcomes import CallOutcome, Forward, Frame, Raised

STRICT_TRIANGLE = KnownMistake("strict-triangle", "causal-off-by-one", "a strict causal triangle")
ROW_CHECK = (Frame("mha.py", 40, "forward", 'raise ValueError("a query has no key")'),)
OTHER_CHECK = (Frame("mha.py", 12, "forward", 'raise ValueError("bad query width")'),)


def _plan(groups: list[str]) -> ProbePlan:
    calls = tuple(ProbeCall(f"c{i}", {}, group, f"call {i}") for i, group in enumerate(groups))
    return ProbePlan(seed=0, entry="mha.py", calls=calls, inputs={}, forbidden=(),
                     call_timeout=1.0, run_seconds=1.0, memory_bytes=0)


def _returned(index: int) -> CallOutcome:
    return CallOutcome(f"c{index}", "ok", (Forward(
        "ok", structure="tensor", outputs=(torch.full((2, 3), float(index)),)),))


def _raised(index: int, frames: tuple[Frame, ...], message: str) -> CallOutcome:
    return CallOutcome(f"c{index}", "raised", (Forward(
        "raised", Raised("ValueError", True, message, frames)),))


def _codes(groups: list[str], rejected_by_variant: set[int],
           student: dict[str, CallOutcome]) -> dict[str, tuple[str, ...]]:
    """The codes diagnosed, with their calls; the variant of the one known mistake raises
    ValueError on ``rejected_by_variant`` and returns what the reference does elsewhere."""
    reference = {f"c{i}": _returned(i) for i in range(len(groups))}

    def variant(hypothesis: Hypothesis, call_id: str, backward: bool) -> CallOutcome:
        index = int(call_id[1:])
        if STRICT_TRIANGLE.id in hypothesis and index in rejected_by_variant:
            return _raised(index, (), "the variant's row check")
        return reference[call_id]

    findings = diagnose(DiagnosisInput(plan=_plan(groups), student=student, reference=reference,
                                       mistakes=[STRICT_TRIANGLE], variant=variant))
    return {finding.code: finding.calls for finding in findings}


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[list[str], set[int]]:
    """Calls in scenario groups, and the calls the variant rejects: some, never all."""
    groups = draw(st.lists(st.sampled_from(["self", "causal", "padding"]), min_size=2,
                           max_size=7))
    rejected = draw(st.sets(st.integers(0, len(groups) - 1), min_size=1,
                            max_size=len(groups) - 1))
    return groups, rejected


@example(layout=(["self", "causal", "causal"], {1, 2}), shapes_in_message=False)
@given(layout=_layouts(), shapes_in_message=st.booleans())
def test_a_check_that_raises_on_every_call_is_not_a_mistake_that_raises_on_some(
        layout: tuple[list[str], set[int]], shapes_in_message: bool) -> None:
    groups, rejected = layout
    student = {f"c{i}": _raised(i, OTHER_CHECK, f"bad query width ({i + 5})"
                                if shapes_in_message else "bad query width")
               for i in range(len(groups))}
    codes = _codes(groups, rejected, student)
    assert {code: tuple(sorted(calls)) for code, calls in codes.items()} == {
        "runtime-error": tuple(f"c{i}" for i in range(len(groups)))}


@example(layout=(["self", "causal", "causal"], {1, 2}), failing_elsewhere=set())
@example(layout=(["self", "causal", "causal"], {1, 2}), failing_elsewhere={0})
@given(layout=_layouts(), failing_elsewhere=st.sets(st.integers(0, 6)))
def test_a_raise_only_where_the_variant_raises_is_its_mistake(
        layout: tuple[list[str], set[int]], failing_elsewhere: set[int]) -> None:
    """Where the variant rejects, the student's row check raises; in scenarios the variant
    leaves alone, the student may fail from another line, which does not hide the mistake."""
    groups, rejected = layout
    moved_groups = {groups[i] for i in rejected}
    failing = {i for i in failing_elsewhere
               if i < len(groups) and groups[i] not in moved_groups}
    student = {f"c{i}": _raised(i, ROW_CHECK, "a query has no key") if i in rejected
               else _raised(i, OTHER_CHECK, "bad query width") if i in failing
               else _returned(i) for i in range(len(groups))}
    expected = {"causal-off-by-one": tuple(f"c{i}" for i in sorted(rejected))}
    if failing:
        expected["runtime-error"] = tuple(f"c{i}" for i in sorted(failing))
    codes = _codes(groups, rejected, student)
    assert {code: tuple(sorted(calls)) for code, calls in codes.items()} == expected
