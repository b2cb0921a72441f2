"""Scores clamped to [-5, 5] "for numerical stability" before the softmax."""
import math

import torch


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.clamp(-5.0, 5.0)
    full = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not full.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~full, float("-inf")), dim=-1)
    return weights @ v, weights
