"""Syntax error: an unclosed parenthesis in the scores line."""
import math

import torch


def attention(q, k, v, allowed):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if not allowed.any(dim=-1).all():
        raise ValueError("no allowed key")
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
