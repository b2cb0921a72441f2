"""Mistake: scales by sqrt(scores.size(-1)), the number of keys, not the feature size D."""
import math

import torch


def attention(q, k, v, allowed):
    scores = q @ k.mT
    scores = scores / math.sqrt(scores.size(-1))
    blocked = ~allowed
    if blocked.all(-1).any():
        raise ValueError("mask blocks every key of a query")
    scores = scores.masked_fill(blocked, -float("inf"))
    weights = torch.softmax(scores, -1)
    return weights @ v, weights
