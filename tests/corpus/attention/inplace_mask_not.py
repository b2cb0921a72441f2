"""Mistake: logical_not_() flips the caller's mask in place to get a 'blocked' mask."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("every row of allowed needs a True")
    blocked = allowed.logical_not_()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(blocked, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
