"""Blocked scores filled with -1e-12 instead of -inf."""
import math
import torch


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores.masked_fill(~allowed, -1e-12), dim=-1)
    return weights @ v, weights
