"""Mistake: blocked scores set to 0 instead of -inf, so blocked keys keep some weight."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("row without allowed keys")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~allowed, 0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
