"""Mistake: the query pre-scaled by d ** -0.5 and the scores divided by sqrt(d) again (1/d overall)."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("masked row")
    d = q.size(-1)
    q = q * d ** -0.5
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
    scores = scores.masked_fill(~allowed, float("-inf"))
    w = scores.softmax(dim=-1)
    return w @ v, w
