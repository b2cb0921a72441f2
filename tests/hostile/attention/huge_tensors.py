"""Correct attention, except that on the 4-D unmasked call (heads) it returns a 48 MiB output tensor."""
import math

import torch


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    if q.dim() == 4 and bool(allowed.all()):
        return torch.ones(12 << 20), weights
    return weights @ v, weights
