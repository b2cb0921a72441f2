"""Mistake: True in the mask treated as 'blocked' (PyTorch attn_mask habit)."""
import math

import torch


def attention(q, k, v, allowed):
    # True marks positions to hide
    if allowed.all(dim=-1).any():
        raise ValueError("a query would see no key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
