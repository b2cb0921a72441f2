"""Calls whose forwards hand state to each other (a KV cache): the runner passes an earlier
forward's returned item on, the grader reads nested returned values strictly, and the
``decoding-matches-full`` check compares a piecewise decoding with the whole pass."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
import torch
from torch import nn

from assignments import ProbeCall
from grader.checks import CheckContext, _decoding_matches_full, leaf_paths
from grader.outcomes import CallOutcome, Forward
from grader.validation import _Invalid, _structure, outcome_from_record
from sandbox.runner.executor import execute_call


class Pair(NamedTuple):
    total: torch.Tensor
    count: torch.Tensor


class RunningSum(nn.Module):
    """Returns (x + everything seen before, Pair(total, count)): state only through the pair."""

    def forward(self, x: torch.Tensor, *, state: Pair | None = None) -> tuple[torch.Tensor, Pair]:
        total = x.sum(dim=1, keepdim=True) + (0 if state is None else state.total)
        count = torch.tensor([x.shape[1]]) + (0 if state is None else state.count)
        return x + total, Pair(total, count)


def _call(forwards: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "steps", "target": "RunningSum", "init": {"args": [], "kwargs": {}},
            "forward": forwards}


INPUTS = {"a": torch.ones(1, 2, 3), "b": torch.full((1, 1, 3), 2.0)}


def _run(forwards: list[dict[str, Any]]) -> CallOutcome:
    record, tensors = execute_call({"RunningSum": RunningSum}, _call(forwards), INPUTS)
    return outcome_from_record(record, tensors)


def test_a_forward_gets_the_item_an_earlier_forward_returned() -> None:
    outcome = _run([
        {"args": [{"tensor": "a"}], "kwargs": {}},
        {"args": [{"tensor": "b"}], "kwargs": {"state": {"output_of": 0, "item": [1]}}},
    ])
    first, second = outcome.forwards
    assert first.structure == "tuple[2](tensor, tuple[2](tensor, tensor))"
    assert len(first.outputs) == 3  # the output, then the pair's two items
    state_total = second.outputs[1]
    assert state_total is not None and torch.equal(state_total, torch.full((1, 1, 3), 4.0))
    count = second.outputs[2]
    assert count is not None and count.tolist() == [3]


def test_a_missing_earlier_item_fails_that_forward_with_a_clear_error() -> None:
    outcome = _run([
        {"args": [{"tensor": "a"}], "kwargs": {}},
        {"args": [{"tensor": "b"}], "kwargs": {"state": {"output_of": 0, "item": [5]}}},
        {"args": [{"tensor": "b"}], "kwargs": {"state": {"output_of": 1, "item": [1]}}},
    ])
    assert outcome.forwards[0].status == "ok"
    for failed in outcome.forwards[1:]:
        assert failed.raised is not None and failed.raised.type == "EarlierOutputMissing"
    assert "no item [5]" in (outcome.forwards[1].raised.message if outcome.forwards[1].raised
                             else "")
    assert "returned nothing" in (outcome.forwards[2].raised.message
                                  if outcome.forwards[2].raised else "")


def test_a_returned_tuple_subclass_is_of_the_wrong_form_but_a_nested_one_is_read() -> None:
    class Sneaky(tuple):  # type: ignore[type-arg]
        pass

    class Returns(nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            return Sneaky((x, x)) if x.shape[1] == 2 else (x, Pair(x, x))

    record, tensors = execute_call({"RunningSum": Returns}, _call(
        [{"args": [{"tensor": "a"}]}, {"args": [{"tensor": "b"}]}]), INPUTS)
    top, nested = outcome_from_record(record, tensors).forwards
    assert top.structure == "Sneaky" and top.outputs == ()
    assert nested.structure == "tuple[2](tensor, tuple[2](tensor, tensor))"


@pytest.mark.parametrize("returned", [
    {"kind": "tuple", "length": 1, "items": [{"kind": "tuple", "length": 1, "items": [
        {"kind": "tuple", "length": 1, "items": [{"kind": "tensor", "key": "x"}]}]}]},
    {"kind": "tuple", "length": 2, "items": [{"kind": "tensor", "key": "x"}, {
        "kind": "tuple", "length": 16, "items": [{"kind": "tensor", "key": f"k{i}"}
                                                 for i in range(16)]}]},
    {"kind": "tuple", "length": 2, "items": [{"kind": "tensor", "key": "x"}, {
        "kind": "tuple", "length": 1, "items": [["not", "a", "description"]]}]},
])
def test_forged_nested_returned_values_are_refused(returned: dict[str, Any]) -> None:
    with pytest.raises(_Invalid):
        _structure(returned)


def test_outputs_are_named_by_their_place_in_the_returned_value() -> None:
    assert leaf_paths("tuple[2]", 2) == ["0", "1"]
    assert leaf_paths("tuple[2](tensor, tuple[3](tensor, tensor, NoneType))", 4) == [
        "[0]", "[1][0]", "[1][1]", "[1][2]"]


def _forwards(*outputs: torch.Tensor) -> CallOutcome:
    return CallOutcome("decode", "ok", tuple(
        Forward(status="ok", structure="tensor", outputs=(o,)) for o in outputs))


def _decoding_verdict(student: CallOutcome, reference: CallOutcome) -> str | None:
    call = ProbeCall("decode", {}, "cache", "a sequence decoded")
    context = CheckContext(plan=None, student={}, reference={})  # type: ignore[arg-type]
    return _decoding_matches_full(call, student, reference, context)


def test_decoding_piece_by_piece_must_equal_the_whole_pass() -> None:
    whole = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    pieces = [whole[:, :1], whole[:, 1:2], whole[:, 2:]]
    reference = _forwards(whole, *pieces)
    assert _decoding_verdict(_forwards(whole, *pieces), reference) is None
    moved = pieces[2] + 1.0
    observation = _decoding_verdict(_forwards(whole, pieces[0], pieces[1], moved), reference)
    assert observation is not None and "from position 2 on" in observation
    short = _decoding_verdict(_forwards(whole, pieces[0], pieces[1]), reference)
    assert short == "the call stopped before all of its steps ran."
