"""Object calls: a call builds an object (an optimiser) on parameters that live for the whole
call, and each forward sets their gradients, calls a method and is judged by what the
parameters became (``assignments.probing.parameter``, ``HeldParameters`` in the executor)."""

from __future__ import annotations

from typing import Any

import torch

from assignments.probing import encode_call, parameter
from grader.outcomes import CallOutcome
from grader.validation import outcome_from_record
from sandbox.runner.executor import execute_call


class Sgd:
    """Plain SGD with momentum: its state lives across steps, its parameters move in place."""

    def __init__(self, params: list[torch.Tensor], lr: float) -> None:
        self.params, self.lr = list(params), lr
        self.velocity: dict[int, torch.Tensor] = {}

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            v = self.velocity.setdefault(id(p), torch.zeros_like(p))
            v.mul_(0.5).add_(p.grad)
            p.sub_(self.lr * v)


class DataAssigned(Sgd):
    """The same numbers, but each parameter gets new memory through ``.data``."""

    @torch.no_grad()
    def step(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.data = p.data - self.lr * p.grad


INPUTS = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([3.0]),
          "g": torch.tensor([1.0, -1.0]), "h": torch.tensor([2.0])}


def _run(cls: type, forwards: list[dict[str, Any]]) -> CallOutcome:
    call = encode_call({"target": "Opt", "object": True,
                        "init": {"args": [[parameter("w"), parameter("b")]],
                                 "kwargs": {"lr": 0.5}},
                        "forward": forwards})
    record, tensors = execute_call({"Opt": cls}, {**call, "id": "steps"}, INPUTS)
    return outcome_from_record(record, tensors)


def _step(grads: dict[str, str | None], outputs: str = "parameters") -> dict[str, Any]:
    return {"method": "step", "grads": grads, "outputs": outputs}


def test_state_and_parameters_live_across_the_steps_of_a_call() -> None:
    outcome = _run(Sgd, [_step({"w": "g", "b": "h"}), _step({"w": "g", "b": None})])
    assert outcome.forwards[0].structure == "tuple[2]"
    values = [[None if t is None else t.tolist() for t in f.outputs] for f in outcome.forwards]
    assert values[0] == [[0.5, 2.5], [2.0]]
    # the velocity was kept (0.5 * g + g) and b, without a gradient, stayed where it was
    assert values[1] == [[-0.25, 3.25], [2.0]]
    assert INPUTS["w"].tolist() == [1.0, 2.0]  # the plan's inputs are copied, never moved


def test_memory_tells_an_in_place_update_from_new_memory_through_data() -> None:
    steps = [_step({"w": "g", "b": "h"}, "memory")]
    kept = _run(Sgd, steps).forwards[0].outputs[0]
    replaced = _run(DataAssigned, steps).forwards[0].outputs[0]
    assert kept is not None and kept.tolist() == [True, True]
    assert replaced is not None and replaced.tolist() == [False, False]


def test_a_missing_method_is_an_interface_error() -> None:
    outcome = _run(Sgd, [{"method": "update", "grads": {"w": "g"}, "outputs": "parameters"}])
    assert outcome.status == "interface" and "no method update()" in outcome.detail


def test_a_step_that_raises_is_recorded_and_the_call_goes_on() -> None:
    class Crashes(Sgd):
        def step(self) -> None:
            raise RuntimeError("boom")

    outcome = _run(Crashes, [_step({"w": "g"}), _step({"w": "g"})])
    assert [f.status for f in outcome.forwards] == ["raised", "raised"]
    raised = outcome.forwards[0].raised
    assert raised is not None and raised.message == "boom"


def test_a_parameter_whose_dtype_the_code_changed_fails_the_next_step_not_the_run() -> None:
    class Widens(Sgd):
        @torch.no_grad()
        def step(self) -> None:
            for p in self.params:
                p.data = p.data.double()

    outcome = _run(Widens, [_step({"w": "g"}), _step({"w": "g"})])
    first, second = outcome.forwards
    assert first.status == "ok"
    assert second.raised is not None and "type" in second.raised.message


def test_parameter_references_survive_the_encoding() -> None:
    encoded = encode_call({"init": {"args": [[{"params": [parameter("w")], "lr": 0.1}]]}})
    assert encoded["init"]["args"] == [[{"dict": {"params": [{"parameter": "w"}],
                                                  "lr": 0.1}}]]


def _matches(meta: dict[str, Any], got: list[torch.Tensor], want: list[torch.Tensor]) -> str | None:
    from assignments import ProbeCall
    from grader.checks import CheckContext, _matches_reference
    from grader.outcomes import Forward

    def outcome(values: list[torch.Tensor]) -> CallOutcome:
        return CallOutcome("steps", "ok", tuple(
            Forward(status="ok", structure=f"tuple[{len(values)}]", outputs=(v, v * 2))
            for v in values))

    call = ProbeCall("steps", {}, "steps", "two steps", meta=meta)
    context = CheckContext(plan=None, student={}, reference={})  # type: ignore[arg-type]
    return _matches_reference(call, outcome(got), outcome(want), context)


def test_feedback_names_the_step_and_the_parameter_in_the_labs_words() -> None:
    same, moved = torch.zeros(2), torch.ones(2)
    meta = {"output_names": ["parameter w", "parameter b"], "forward_name": "step"}
    assert _matches(meta, [same, moved], [same, same]) == (
        "after step 2, parameter w differs from the expected values by up to 1.")
    # without names, the grader's own words (the attention labs' convention)
    assert _matches({}, [same, moved], [same, same]) == (
        "the output differs from the expected values by up to 1.")


def test_a_small_boolean_output_is_quoted_whole() -> None:
    kept, lost = torch.tensor([True, True]), torch.tensor([True, False])
    assert _matches({"output_names": ["whether each kept its memory"]}, [lost], [kept]) == (
        "whether each kept its memory is [True, False], expected [True, True].")
