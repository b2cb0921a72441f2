"""Mistake: uses q.data / k.data / v.data, which silently leaves the autograd graph."""
import math

import torch


def attention(q, k, v, allowed):
    q, k, v = q.data, k.data, v.data
    scores = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.shape[-1])
    if not allowed.any(-1).all():
        raise ValueError("a query row is fully masked")
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ v, weights
