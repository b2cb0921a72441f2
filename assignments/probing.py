"""Helpers for writing probe plans: seeded inputs, masks that keep every variant finite."""

from __future__ import annotations

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


def tensor(key: str, *, grad: bool = False) -> dict[str, Any]:
    """A plan argument naming an input tensor."""
    return {"tensor": key, "grad": True} if grad else {"tensor": key}


def shape_of(bank: InputBank, key: str) -> str:
    return "(" + ", ".join(str(size) for size in bank.value(key).shape) + ")"
