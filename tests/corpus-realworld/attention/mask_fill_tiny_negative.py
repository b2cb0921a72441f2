"""Mistake: masked_fill(mask == 0, -1e-9), a typo for -1e9: blocked scores become about 0."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("fully masked row")
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(allowed == 0, -1e-9)
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v), p
