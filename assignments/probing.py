"""Helpers for writing probe plans: seeded inputs, masks that keep every variant finite, and
the encoding of a call's arguments for the runner."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch


class InputBank:
    """Collects a plan's input tensors under unique keys, drawn from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.tensors: dict[str, torch.Tensor] = {}

    def add(self, key: str, tensor: torch.Tensor) -> str:
        if key in self.tensors:
            raise ValueError(f"input {key!r} defined twice")
        self.tensors[key] = tensor
        return key

    def randn(self, key: str, *shape: int, dtype: torch.dtype = torch.float32,
              scale: float = 1.0) -> str:
        values = torch.randn(*shape, generator=self.generator, dtype=torch.float64) * scale
        return self.add(key, values.to(dtype))

    def mixed_mask(self, key: str, *shape: int) -> str:
        """A mask whose every row and column has an allowed and a blocked entry.

        That keeps the known mistakes (an inverted mask, softmax over the query axis) finite,
        so they are told apart by their numbers rather than all collapsing into NaN.
        """
        while True:
            mask = torch.rand(*shape, generator=self.generator) < 0.6
            rows_mixed = mask.any(-1).all() and (~mask).any(-1).all()
            columns_mixed = mask.any(-2).all() and (~mask).any(-2).all()
            if bool(rows_mixed and columns_mixed):
                return self.add(key, mask)

    def value(self, key: str) -> torch.Tensor:
        return self.tensors[key]


class TensorInput(dict[str, Any]):
    """A plan argument naming an input tensor: ``{"tensor": key}`` (``"grad": True`` when the
    call wants its gradient). A dict, so that checks read its key as they read the plan; its
    type, not its keys, tells it from a dict argument."""


class EarlierOutput(dict[str, Any]):
    """A plan argument naming what an earlier forward of the same module call returned:
    ``{"output_of": N, "item": [i, ...]}`` (item i of it, and so on)."""


class ParameterInput(dict[str, Any]):
    """A plan argument naming a parameter of the call: ``{"parameter": key}``."""


def parameter(key: str) -> ParameterInput:
    """A plan argument: a ``torch.nn.Parameter`` holding a copy of input ``key``, made once
    per call and the same object wherever that call names it (its constructor's arguments, its
    forwards), so that an object the call builds (an optimiser) keeps acting on it. A forward
    may set the call's parameters' gradients (``"grads": {key: grad_key or None}``) and be
    judged by their values after it (``"outputs": "parameters"``) or by whether each still
    holds its memory (``"outputs": "memory"``): ``sandbox.runner.executor.HeldParameters``."""
    return ParameterInput(parameter=key)


def tensor(key: str, *, grad: bool = False) -> TensorInput:
    """A plan argument naming an input tensor."""
    return TensorInput(tensor=key, grad=True) if grad else TensorInput(tensor=key)


def earlier(forward: int, *item: int) -> EarlierOutput:
    """A plan argument: what forward ``forward`` of the same call returned (``item`` indexes
    into it: ``earlier(0, 1)`` is item 1 of the first forward's returned tuple)."""
    return EarlierOutput(output_of=forward, item=list(item))


class PlanValueError(TypeError):
    """A probe argument the plan cannot carry to the runner with its type."""




def encode_call(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The call spec with its arguments (``args``, ``kwargs``, of ``init`` and of each
    ``forward``) encoded for the runner, whose executor decodes them to the values written
    (``sandbox.runner.executor``): JSON alone would turn a tuple into a list."""
    encoded = dict(spec)
    _encode_arguments(encoded, "")
    if isinstance(spec.get("init"), Mapping):
        encoded["init"] = dict(spec["init"])
        _encode_arguments(encoded["init"], "init.")
    if "forward" in spec:
        encoded["forward"] = []
        for index, forward in enumerate(spec["forward"]):
            encoded["forward"].append(dict(forward))
            _encode_arguments(encoded["forward"][-1], f"forward[{index}].")
    return encoded


def _encode_arguments(spec: dict[str, Any], where: str) -> None:
    if "args" in spec:
        spec["args"] = [encode_value(value, f"{where}args[{index}]", top=True)
                        for index, value in enumerate(spec["args"])]
    if "kwargs" in spec:
        spec["kwargs"] = {name: encode_value(value, f"{where}kwargs[{name!r}]", top=True)
                          for name, value in spec["kwargs"].items()}


def _is_reference(value: dict[Any, Any]) -> bool:
    """Whether a plain dict is a tensor or earlier-output reference as the wire writes it."""
    if isinstance(value.get("tensor"), str):
        return value.keys() <= {"tensor", "grad"}
    if isinstance(value.get("output_of"), int):
        return value.keys() <= {"output_of", "item"}
    if isinstance(value.get("parameter"), str):
        return value.keys() == {"parameter"}
    return False


def encode_value(value: Any, where: str = "argument", *, top: bool = False) -> Any:
    """One argument as plain JSON that keeps its Python type: None, bool, int, str and finite
    floats as they are (JSON tells ``1`` from ``1.0``); a list as a list; a tuple as
    ``{"tuple": [...]}``; a dict with string keys as ``{"dict": {...}}``; inf, -inf and nan as
    ``{"float": "inf"}`` (strict JSON has none); ``tensor(...)``, ``earlier(...)`` and
    ``parameter(...)`` as the references they are, and a plain dict written as such a
    reference (``{"tensor": key}``) too. Every JSON object among the encoded arguments is thus
    one of these six tags, so
    another dict argument never reads as a reference. Anything else (a subclass of
    these types too) raises ``PlanValueError`` naming ``where``. A tensor that wants its
    gradient must be an argument itself (``top``): only those are tracked."""
    if type(value) is dict and _is_reference(value):
        # Written by hand as the wire has it (labs made before tensor() and earlier()).
        value = (TensorInput(value) if "tensor" in value
                 else ParameterInput(value) if "parameter" in value
                 else EarlierOutput(value))
    if isinstance(value, ParameterInput):
        return {"parameter": str(value["parameter"])}
    if isinstance(value, TensorInput):
        if value.get("grad") and not top:
            raise PlanValueError(f"{where}: tensor(..., grad=True) inside a container; only a "
                                 "tensor that is an argument itself gets its gradient checked")
        return dict(value)
    if isinstance(value, EarlierOutput):
        return {"output_of": int(value["output_of"]),
                "item": [int(index) for index in value.get("item", [])]}
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"}
    if type(value) is list:
        return [encode_value(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if type(value) is tuple:
        return {"tuple": [encode_value(item, f"{where}[{index}]")
                          for index, item in enumerate(value)]}
    if type(value) is dict:
        for key in value:
            if not isinstance(key, str):
                raise PlanValueError(f"{where}: a dict key {key!r} that is not a string")
        return {"dict": {key: encode_value(item, f"{where}[{key!r}]")
                         for key, item in value.items()}}
    raise PlanValueError(f"{where}: a {type(value).__name__} is not a probe argument (None, "
                         "bool, int, float, str, list, tuple, dict with string keys, "
                         "tensor(...), earlier(...) or parameter(...))")


def shape_of(bank: InputBank, key: str) -> str:
    return "(" + ", ".join(str(size) for size in bank.value(key).shape) + ")"
