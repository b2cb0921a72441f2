"""Runtime error: loops one position too far over the keys (IndexError on every call)."""
import math

import torch


def attention(q, k, v, allowed):
    S = k.shape[-2]
    if not allowed.any(dim=-1).all():
        raise ValueError("a row has no allowed key")
    columns = []
    for j in range(S + 1):
        columns.append((q * k[..., j, None, :]).sum(-1))
    scores = torch.stack(columns, dim=-1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
