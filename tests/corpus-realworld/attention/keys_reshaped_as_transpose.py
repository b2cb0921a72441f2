"""Keys "transposed" by a reshape to (..., D, S): the right shape, the wrong elements."""
import math

import torch


def attention(q, k, v, allowed):
    *lead, s, d = k.shape
    kt = k.reshape(*lead, d, s)
    scores = q @ kt / math.sqrt(d)
    allowed = torch.broadcast_to(allowed, scores.shape)
    if not allowed.any(dim=-1).all():
        raise ValueError("a query row has no allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
