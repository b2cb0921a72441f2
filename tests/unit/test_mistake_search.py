"""The mistake search on made-up outcomes: when a raise the student shares with a variant is
that variant's mistake, and when it is the student's code failing on every input; mistakes
that share a code, found together and told by their code when they tie; mistakes that move a
probe by less than the evidence margin, told apart where the probe shows the student's values."""

from __future__ import annotations

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from assignments import KnownMistake, ProbeCall, ProbePlan
from grader.compare import tolerance
from grader.diagnosis import DiagnosisInput, diagnose
from grader.mistake_search import Hypothesis, co_occurring_pairs
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


# Made-up mistakes that add to the outputs: two variants of one code, and one of another code
# that cannot co-occur with them.
ROWS = KnownMistake("rows-inverted", "mask-inverted", "the causal mask read backwards")
PADDING = KnownMistake("padding-inverted", "mask-inverted", "the padding mask read backwards")
SCALE = KnownMistake("missing-scale", "missing-scale", "scores not scaled",
                     excludes=frozenset({ROWS.id, PADDING.id}))


def _shifted(index: int, by: float, grad: float | None = None) -> CallOutcome:
    """Call ``c{index}`` returning ``index + by``, with that gradient for ``q`` if given."""
    grads = {} if grad is None else {"arg0": torch.full((2, 3), grad)}
    return CallOutcome(f"c{index}", "ok", (Forward(
        "ok", structure="tensor", outputs=(torch.full((2, 3), float(index) + by),),
        grads=grads),))


def _diagnosed(groups: list[str], mistakes: list[KnownMistake],
               shifts: dict[str, dict[int, float]], student: dict[int, float],
               grads: dict[str, float] | None = None,
               student_grads: dict[int, float] | None = None) -> dict[str, tuple[str, ...]]:
    """The codes diagnosed, with their calls: each mistake shifts the calls ``shifts`` gives it
    (a pair adds up); with ``grads``, each gives that gradient on every call (the reference 0),
    and the student ``student_grads``."""
    grads = grads or {}
    student_grads = student_grads or {}
    with_grads = bool(grads)
    reference = {f"c{i}": _shifted(i, 0.0, 0.0 if with_grads else None)
                 for i in range(len(groups))}

    def variant(hypothesis: Hypothesis, call_id: str, backward: bool) -> CallOutcome:
        index = int(call_id[1:])
        by = sum(shifts.get(m, {}).get(index, 0.0) for m in hypothesis)
        grad = sum(grads.get(m, 0.0) for m in hypothesis)
        return _shifted(index, by, grad if with_grads else None)

    outcomes = {f"c{i}": _shifted(i, student.get(i, 0.0), student_grads.get(i, 0.0)
                                  if with_grads else None) for i in range(len(groups))}
    findings = diagnose(DiagnosisInput(plan=_plan(groups), student=outcomes,
                                       reference=reference, mistakes=mistakes, variant=variant))
    return {finding.code: finding.calls for finding in findings}


@given(first=st.integers(1, 40), second=st.integers(1, 40), same_call=st.booleans())
def test_two_mistakes_that_share_a_code_are_found_together(
        first: int, second: int, same_call: bool) -> None:
    """Both present, in one scenario: only the pair explains the outputs, and its one code is
    the diagnosis."""
    shifts = {ROWS.id: {0: float(first)},
              PADDING.id: {0 if same_call else 1: float(second * 100)}}
    student = {0: float(first + second * 100)} if same_call else {
        0: float(first), 1: float(second * 100)}
    codes = _diagnosed(["causal", "causal"], [ROWS, PADDING], shifts, student)
    assert codes == {"mask-inverted": (("c0",) if same_call else ("c0", "c1"))}


def test_same_code_variants_that_tie_give_their_code() -> None:
    """On the causal call both variants give the student's outputs; the padding call is the
    other mistake's. No pair explains both (the scale excludes the masks), so each scenario is
    explained alone, and the tie there is one code."""
    shifts = {ROWS.id: {0: 1.0}, PADDING.id: {0: 1.0}, SCALE.id: {1: 5.0}}
    codes = _diagnosed(["causal", "padding"], [ROWS, PADDING, SCALE], shifts, {0: 1.0, 1: 5.0})
    assert codes == {"mask-inverted": ("c0",), "missing-scale": ("c1",)}


def test_tied_variants_of_different_codes_stay_unexplained() -> None:
    other = KnownMistake(PADDING.id, "mask-ignored", "the padding mask never applied")
    shifts = {ROWS.id: {0: 1.0}, other.id: {0: 1.0}, SCALE.id: {1: 5.0}}
    codes = _diagnosed(["causal", "padding"], [ROWS, other, SCALE], shifts, {0: 1.0, 1: 5.0})
    assert codes == {"wrong-output": ("c0",), "missing-scale": ("c1",)}


def test_tied_variants_gradients_are_those_of_either() -> None:
    """The student's gradients are the second tied variant's: as expected, not gradient-wrong."""
    shifts = {ROWS.id: {0: 1.0}, PADDING.id: {0: 1.0}, SCALE.id: {1: 5.0}}
    codes = _diagnosed(["causal", "padding"], [ROWS, PADDING, SCALE], shifts, {0: 1.0, 1: 5.0},
                       {ROWS.id: 1.0, PADDING.id: 2.0}, {0: 2.0})
    assert set(codes) == {"mask-inverted", "missing-scale"}


def test_pairs_that_share_a_code_can_co_occur() -> None:
    assert [(a.id, b.id) for a, b in co_occurring_pairs([ROWS, PADDING, SCALE])] == [
        (ROWS.id, PADDING.id)]


EPSILON_INSIDE = KnownMistake("eps-inside-root", "epsilon-inside-root", "sqrt(var + eps)")
EPSILON_OUTSIDE = KnownMistake("eps-outside-root", "epsilon-outside-root", "sqrt(var) + eps")


@given(inside=st.integers(2, 9), apart=st.integers(3, 10), student_inside=st.booleans())
def test_a_mistake_within_the_evidence_margin_is_named_where_the_probe_shows_it(
        inside: int, apart: int, student_inside: bool) -> None:
    """Two epsilons of different codes move a call by fewer tolerances than the evidence
    margin, so the call cannot tell either from the reference; the student's values match one
    of them within the tolerance itself, and that one is named."""
    step = tolerance(torch.float32)[0]
    shifts = {EPSILON_INSIDE.id: {0: inside * step},
              EPSILON_OUTSIDE.id: {0: (inside + apart) * step}}
    mine = EPSILON_INSIDE if student_inside else EPSILON_OUTSIDE
    codes = _diagnosed(["plain", "plain"], [EPSILON_INSIDE, EPSILON_OUTSIDE], shifts,
                       {0: shifts[mine.id][0]})
    assert codes == {mine.code: ("c0",)}
