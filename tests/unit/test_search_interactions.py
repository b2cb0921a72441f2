"""The mistake search where two mistakes act together as neither does alone (one mistake turns
values infinite or changes the returned shape, and the other acts on what it left), and where a
known mistake returns a tensor of another shape than the reference's."""

from __future__ import annotations

from collections.abc import Callable

import torch

from assignments import KnownMistake, ProbeCall, ProbePlan
from grader.diagnosis import DiagnosisInput, diagnose
from grader.mistake_search import Hypothesis
from grader.outcomes import CallOutcome, Forward

FIRST = KnownMistake("first", "first-code", "the first mistake")
SECOND = KnownMistake("second", "second-code", "the second mistake")
Values = Callable[[Hypothesis, int], torch.Tensor]


def _outcome(index: int, value: torch.Tensor) -> CallOutcome:
    return CallOutcome(f"c{index}", "ok", (Forward("ok", structure="tensor", outputs=(value,)),))


def _codes(values: Values, student: Hypothesis | torch.Tensor, calls: int = 2) -> set[str]:
    """The codes diagnosed when each call returns ``values(mistakes, call)`` and the student
    returns what the variant with ``student`` switched on does (or this tensor on call 0)."""
    plan = ProbePlan(seed=0, entry="loss.py", forbidden=(), inputs={}, call_timeout=1.0,
                     run_seconds=1.0, memory_bytes=0,
                     calls=tuple(ProbeCall(f"c{i}", {}, "all", f"call {i}")
                                 for i in range(calls)))
    reference = {f"c{i}": _outcome(i, values(frozenset(), i)) for i in range(calls)}
    if isinstance(student, torch.Tensor):
        students = {**reference, "c0": _outcome(0, student)}
    else:
        students = {f"c{i}": _outcome(i, values(student, i)) for i in range(calls)}

    def variant(hypothesis: Hypothesis, call_id: str, backward: bool) -> CallOutcome:
        index = int(call_id[1:])
        return _outcome(index, values(hypothesis, index))

    findings = diagnose(DiagnosisInput(plan=plan, student=students, reference=reference,
                                       mistakes=[FIRST, SECOND], variant=variant))
    return {finding.code for finding in findings}


BOTH = frozenset({"first", "second"})


def test_a_mistake_that_shows_only_through_another_ones_infinity_is_found() -> None:
    # Call 0: the first makes a value tiny, the second takes its log (-inf) only then.
    def values(mistakes: Hypothesis, call: int) -> torch.Tensor:
        base = torch.tensor([1.0, 2.0, 3.0]) + call
        if call == 1 and "second" in mistakes:
            base = base * 3
        if call == 0 and "first" in mistakes:
            base = base.clone()
            base[0] = float("-inf") if "second" in mistakes else -100.0
        return base

    assert _codes(values, BOTH) == {"first-code", "second-code"}


def test_a_mistake_acting_on_what_another_reshaped_is_found() -> None:
    # The first returns one summary value instead of one per item; the second changes that
    # summary only (a mean over the wrong count behind an ignored reduction).
    def values(mistakes: Hypothesis, call: int) -> torch.Tensor:
        items = torch.tensor([1.0, 2.0, 4.0]) * (call + 1)
        if call == 1:
            total = items.sum() / (4 if "second" in mistakes else 3)
            return total.reshape(()) if "first" in mistakes else items * 0 + total
        if "first" in mistakes:
            return items.sum() / (4 if "second" in mistakes else 3)
        return items

    assert _codes(values, BOTH) == {"first-code", "second-code"}


def test_a_shape_a_known_mistake_returns_is_that_mistake() -> None:
    def values(mistakes: Hypothesis, call: int) -> torch.Tensor:
        items = torch.tensor([1.0, 2.0, 4.0]) + call
        return items.mean() if "first" in mistakes else items

    assert _codes(values, frozenset({"first"})) == {"first-code"}


def test_a_shape_no_known_mistake_returns_is_an_interface_error() -> None:
    def values(mistakes: Hypothesis, call: int) -> torch.Tensor:
        items = torch.tensor([1.0, 2.0, 4.0]) + call
        return items.mean() if "first" in mistakes else items

    assert _codes(values, torch.tensor(9.0)) == {"interface-error"}


def test_a_pair_is_not_ruled_out_by_a_call_it_barely_moves() -> None:
    # Call 0: together the two move it beyond the tolerance but within the evidence margin,
    # where neither alone moves it: no evidence for or against the pair.
    def values(mistakes: Hypothesis, call: int) -> torch.Tensor:
        base = torch.tensor([1.0, 2.0, 3.0]) + call
        if call == 0:
            return base + 1e-3 * len(mistakes) ** 2
        return base + sum(5.0 * (index + 1) for index, mistake in enumerate(("first", "second"))
                          if mistake in mistakes)

    assert _codes(values, BOTH) == {"first-code", "second-code"}


def test_a_pair_is_not_ruled_out_where_one_member_barely_moves_a_call() -> None:
    # Call 0: the second alone moves it less than the evidence margin, so the pair may differ
    # from the first alone by that much there.
    def values(mistakes: Hypothesis, call: int) -> torch.Tensor:
        base = torch.tensor([1.0, 2.0, 3.0]) + call
        if "first" in mistakes:
            base = base + 5.0
        if "second" in mistakes:
            base = base + (5e-3 if call == 0 else 7.0)
        return base

    assert _codes(values, BOTH) == {"first-code", "second-code"}
