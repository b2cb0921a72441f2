"""Attention with rotary embeddings and a KV cache: fill in `scores`."""

import torch


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q (..., T, D), k (..., S, D) -> q kᵀ / sqrt(D), shape (..., T, S)."""
    raise NotImplementedError
