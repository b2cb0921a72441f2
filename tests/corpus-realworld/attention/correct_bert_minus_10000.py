"""Correct: the older BERT habit, an additive (1.0 - mask) * -10000.0 bias.

With scores of a few units, exp(-10000) is exactly 0 in float32 and float64.
"""
import math

import torch


def attention(q, k, v, allowed):
    bias = (1.0 - allowed.float()) * -10000.0
    if bool((bias < 0).all(-1).any()):
        raise ValueError("a query position is fully masked")
    scores = torch.matmul(q, k.transpose(-1, -2))
    scores = scores / math.sqrt(k.size(-1))
    scores = scores + bias.to(scores.dtype)
    probs = torch.nn.Softmax(dim=-1)(scores)
    return torch.matmul(probs, v), probs
