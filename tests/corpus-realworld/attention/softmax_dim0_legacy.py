"""Mistake: softmax over dim 0 (the batch axis), the old implicit-dim habit written out."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("row without an allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, -1e9)
    weights = torch.softmax(scores, 0)
    return weights @ v, weights
