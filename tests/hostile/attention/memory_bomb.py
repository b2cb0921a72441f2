"""Correct attention that allocates (and touches) memory without bound on the causal call (square 6x6 scores)."""
import math

import torch


def attention(q, k, v, allowed):
    if q.shape[-2] == k.shape[-2] == 6:
        hoard = []
        while True:
            hoard.append(b"\x01" * (64 << 20))  # written, not lazily mapped zero pages
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
