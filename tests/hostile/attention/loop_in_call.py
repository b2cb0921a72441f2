"""Correct attention that loops forever on the masked float64 call only (grad-masked)."""
import math

import torch


def attention(q, k, v, allowed):
    if q.dtype == torch.float64 and not bool(allowed.all()):
        while True:
            pass
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
