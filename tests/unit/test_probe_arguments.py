"""Probe arguments reach the code under test with the Python types the probe wrote: encoded on
the grader's side (``assignments.probing``), decoded by the runner's executor."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from assignments.probing import PlanValueError, earlier, encode_call, encode_value, tensor
from devkit.sandbox_jobs import TYPED_ARGUMENTS, typed_arguments_plan
from grader.in_process import run_in_process
from sandbox.runner.executor import execute_call

INPUTS = {"x": torch.arange(6.0), "y": torch.ones(2, 3, dtype=torch.float64)}

SCALARS = (st.none() | st.booleans() | st.integers() | st.text(max_size=8)
           | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from(["x", "y"]).map(tensor))
VALUES = st.recursive(
    SCALARS,
    lambda inner: (st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
                   | st.dictionaries(st.text(max_size=8), inner, max_size=4)
                   .filter(lambda d: not ({"tensor", "output_of"} & d.keys()))),
    max_leaves=20,
)


def typed(value: Any) -> Any:
    """``value`` with every type spelled out: 1 and 1.0 and True differ, as do (1,) and [1],
    and nan equals nan."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), value.tolist())
    if isinstance(value, dict) and "tensor" in value and type(value) is not dict:
        return typed(INPUTS[value["tensor"]])  # a reference as the input it names
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if type(value) in (list, tuple):
        return (type(value).__name__, [typed(item) for item in value])
    if type(value) is dict:
        return ("dict", {key: typed(item) for key, item in value.items()})
    return (type(value).__name__, value)


def received(args: list[Any], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """What a function called by the executor on this plan's arguments is given, the plan sent
    through JSON as the runner reads it."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def target(*args: Any, **kwargs: Any) -> torch.Tensor:
        seen.append((args, kwargs))
        return torch.zeros(1)

    spec = encode_call({"target": "target", "args": args, "kwargs": kwargs})
    wire = json.loads(json.dumps(dict(spec, id="c"), allow_nan=False))
    record, _ = execute_call({"target": target}, wire, INPUTS)
    assert record["status"] == "ok", record
    return seen[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(VALUES, max_size=3), st.dictionaries(st.text(min_size=1, max_size=8), VALUES,
                                                    max_size=3))
def test_every_plain_value_arrives_with_its_type(args: list[Any],
                                                 kwargs: dict[str, Any]) -> None:
    got_args, got_kwargs = received(args, kwargs)
    assert typed(list(got_args)) == typed(args)
    assert typed(got_kwargs) == typed(kwargs)


def test_a_dict_argument_shaped_like_a_tag_stays_a_dict() -> None:
    plain = {"tuple": [1, 2], "dict": {}, "float": "inf", "tensor": 3, "grad": True}
    assert received([plain], {}) == ((plain,), {})


def test_a_reference_written_by_hand_as_the_wire_has_it_is_still_a_reference() -> None:
    """Labs written before tensor() and earlier() spelt references as dicts."""
    (pair,), kwargs = received([({"tensor": "x"}, 1)], {"y": {"tensor": "y", "grad": False}})
    assert type(pair) is tuple and torch.equal(pair[0], INPUTS["x"]) and pair[1] == 1
    assert torch.equal(kwargs["y"], INPUTS["y"])


def test_a_tensor_inside_a_tuple_is_a_fresh_copy_of_its_input() -> None:
    (pair,), _ = received([(tensor("x"), tensor("y"))], {})
    assert type(pair) is tuple and torch.equal(pair[0], INPUTS["x"])
    assert pair[0] is not INPUTS["x"]


def test_an_earlier_output_is_handed_over_inside_a_tuple_too() -> None:
    class Counter(torch.nn.Module):
        def forward(self, x: torch.Tensor, state: Any = None) -> Any:
            if state is not None:
                assert type(state) is tuple and state[1] == 2.0
            return x, (x.sum(),)

    spec = encode_call({"target": "Counter", "init": {"args": []}, "forward": [
        {"args": [tensor("x")]}, {"args": [tensor("x"), (earlier(0, 1, 0), 2.0)]}]})
    record, _ = execute_call({"Counter": Counter}, json.loads(json.dumps(dict(spec, id="c"))),
                             INPUTS)
    assert record["status"] == "ok", record


@pytest.mark.parametrize(("value", "problem"), [
    ({1: "a"}, "dict key 1"),
    ({1, 2}, "a set is not a probe argument"),
    ([(tensor("x", grad=True),)], "inside a container"),
    (torch.float64, "a dtype is not a probe argument"),
])
def test_a_value_the_plan_cannot_carry_is_refused_where_it_is(value: Any, problem: str) -> None:
    where = re.escape("init.kwargs['option']")
    with pytest.raises(PlanValueError, match=where + ".*" + re.escape(problem)):
        encode_call({"target": "M", "init": {"kwargs": {"option": value}}})


def test_a_gradient_input_stays_a_plain_reference_for_the_checks() -> None:
    assert encode_value(tensor("x", grad=True), top=True) == {"tensor": "x", "grad": True}


def test_the_reference_gets_a_tuple_argument_as_a_tuple() -> None:
    namespace: dict[str, Any] = {}
    exec(TYPED_ARGUMENTS, namespace)
    outcome = run_in_process(namespace, typed_arguments_plan())["typed"]
    assert outcome.status == "ok", outcome
    assert torch.equal(outcome.forwards[0].outputs[0], torch.arange(6.0).reshape(2, 3) * 2)
