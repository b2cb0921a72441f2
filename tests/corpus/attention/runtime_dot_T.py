"""Runtime error: k.T on a batched tensor reverses every dim, so the matmul shapes do not match."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("all keys masked")
    scores = torch.matmul(q, k.T) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
