"""Mistake: the scores multiplied by a 0/1 mask before softmax (a masked score is 0, not -inf)."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("a query with no allowed key")
    a = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
    a = a * allowed.to(a.dtype)
    a = torch.softmax(a, dim=-1)
    return torch.matmul(a, v), a
