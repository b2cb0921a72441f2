"""Interface: returns a dict {"output": ..., "weights": ...} instead of the (output, weights) tuple."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return {"output": weights @ v, "weights": weights}
