"""Hidden: the probe plan of ``adamw``: optimisers stepped several times on the grader's
gradients, parameters without a gradient, two groups with their own hyperparameters.

Each call builds one ``AdamW`` on parameters the call holds (``parameter(key)``) and steps it
several times; before each step the grader sets every parameter's ``.grad`` (or leaves it
None), and each step is judged by the parameters' values after it (or, in ``in-place``, by
whether each still holds its own memory). The hyperparameters are chosen so that every known
mistake moves the parameters far beyond the tolerance: a large eps in one group (an eps in the
wrong place shows), a large weight decay with a large learning rate (decay applied in the
wrong order or scale shows), and a parameter that skips steps (its own step counter shows).
"""

from __future__ import annotations

from typing import Any

import torch

from assignments.model import ProbeCall
from assignments.probing import InputBank, parameter

TARGET = "AdamW"


def build_calls(seed: int) -> tuple[list[ProbeCall], dict[str, torch.Tensor]]:
    bank = InputBank(seed)
    calls: list[ProbeCall] = []

    def params(call: str, **shapes: tuple[int, ...]) -> dict[str, str]:
        return {name: bank.randn(f"{call}.{name}", *shape) for name, shape in shapes.items()}

    def gradient(key: str, like: str, scale: float) -> str:
        """A gradient whose every entry is at least ``scale / 2`` from zero: the square root of
        its second moment is then far above a small eps, so that where eps belongs shows only
        where the call makes eps large."""
        drawn = torch.randn(bank.value(like).shape, generator=bank.generator,
                            dtype=torch.float64)
        return bank.add(key, (scale * drawn.sign() * (0.5 + drawn.abs())).float())

    def steps(call: str, keys: dict[str, str], count: int, *, scale: dict[str, float] | None = None,
              without: dict[str, set[int]] | None = None,
              outputs: str = "parameters") -> list[dict[str, Any]]:
        """``count`` steps; ``without[name]``: the steps in which that parameter has no grad."""
        forwards = []
        for index in range(count):
            grads: dict[str, str | None] = {}
            for name, key in keys.items():
                if index in (without or {}).get(name, set()):
                    grads[key] = None
                else:
                    grads[key] = gradient(f"{call}.grad{index}.{name}", key,
                                          (scale or {}).get(name, 1.0))
            forwards.append({"method": "step", "grads": grads, "outputs": outputs})
        return forwards

    def call(name: str, group: str, describe: str, args: list[Any], kwargs: dict[str, Any],
             forwards: list[dict[str, Any]]) -> None:
        spec = {"target": TARGET, "object": True, "init": {"args": args, "kwargs": kwargs},
                "forward": forwards}
        names = [f"parameter {key.rpartition('.')[2]}" for key in forwards[0]["grads"]]
        if forwards[0]["outputs"] == "memory":
            names = ["whether each parameter kept its memory"]
        calls.append(ProbeCall(name, spec, group, describe,
                               meta={"output_names": names, "forward_name": "step"}))

    keys = params("single", w=(3, 4))
    call("single", "single", "one parameter (3, 4), 6 steps, lr=0.05, betas=(0.9, 0.999), "
         "eps=1e-8, weight_decay=0", [[parameter(keys["w"])]],
         {"lr": 0.05, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0},
         steps("single", keys, 6))

    keys = params("groups", w=(4, 3), b=(3,), c=(2, 5))
    groups = [
        {"params": [parameter(keys["w"]), parameter(keys["b"])], "lr": 0.03,
         "betas": (0.8, 0.99)},
        {"params": [parameter(keys["c"])], "lr": 0.2, "betas": (0.7, 0.9), "eps": 0.05,
         "weight_decay": 0.8},
    ]
    call("groups", "groups", "two groups: w (4, 3) and b (3,) with lr=0.03, betas=(0.8, 0.99) "
         "and the constructor's eps=0.02, weight_decay=0.3; c (2, 5) with lr=0.2, "
         "betas=(0.7, 0.9), eps=0.05, weight_decay=0.8; the constructor's lr=0.1, "
         "betas=(0.9, 0.95); 8 steps", [groups],
         {"lr": 0.1, "betas": (0.9, 0.95), "eps": 0.02, "weight_decay": 0.3},
         steps("groups", keys, 8, scale={"c": 0.1}))

    keys = params("skips", a=(3, 3), s=(4,), n=(2,))
    call("skips", "skips", "a (3, 3) with a gradient in every step, s (4,) without one in "
         "steps 3 to 6, n (2,) never with one; lr=0.1, betas=(0.5, 0.999), eps=1e-8, "
         "weight_decay=0.5; 9 steps",
         [[parameter(keys["a"]), parameter(keys["s"]), parameter(keys["n"])]],
         {"lr": 0.1, "betas": (0.5, 0.999), "eps": 1e-8, "weight_decay": 0.5},
         steps("skips", keys, 9, without={"s": {2, 3, 4, 5}, "n": set(range(9))}))

    keys = params("in-place", w=(2, 3), b=(3,))
    call("in-place", "in-place", "w (2, 3) and b (3,), 2 steps, lr=0.05",
         [[parameter(keys["w"]), parameter(keys["b"])]], {"lr": 0.05},
         steps("in-place", keys, 2, outputs="memory"))

    keys = params("invalid", w=(2, 2))
    call("invalid", "invalid-lr", "AdamW(params, lr=-0.01): a negative learning rate",
         [[parameter(keys["w"])]], {"lr": -0.01}, steps("invalid", keys, 1))
    keys = params("invalid-beta", w=(2, 2))
    call("invalid-beta", "invalid-beta", "AdamW(params, lr=0.01, betas=(0.9, 1.0)): a beta of 1",
         [[parameter(keys["w"])]], {"lr": 0.01, "betas": (0.9, 1.0)},
         steps("invalid-beta", keys, 1))
    return calls, bank.tensors
