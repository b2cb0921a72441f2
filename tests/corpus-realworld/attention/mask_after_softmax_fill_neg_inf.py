"""Mistake: masked_fill(-inf) applied to the weights after softmax instead of to the scores."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("a query has no key")
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores, dim=-1)
    weights = weights.masked_fill(~allowed, float("-inf"))
    return torch.matmul(weights, v), weights
