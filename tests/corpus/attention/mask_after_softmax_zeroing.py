"""Weights of blocked keys zeroed after softmax (masked_fill 0)."""
import math
import torch


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores, dim=-1).masked_fill(~allowed, 0.0)
    return weights @ v, weights
