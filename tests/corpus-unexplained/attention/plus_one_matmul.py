"""Softmax plus one: the denominator gets an extra 1 ("so a query may attend to nothing")."""
import math

import torch


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    full = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not full.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    scores = scores.masked_fill(~full, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    e = torch.exp(scores - top)
    weights = e / (torch.exp(-top) + e.sum(dim=-1, keepdim=True))
    return weights @ v, weights
