"""Mistake: softmax taken over dim=-2 (the query axis) instead of the key axis."""
import math

import torch


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not mask.any(dim=-1).all():
        raise ValueError("query row with no allowed key")
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    return weights @ v, weights
