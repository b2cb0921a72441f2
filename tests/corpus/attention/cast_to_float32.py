"""Mistake: inputs converted with .float(), so float64 inputs come back as float32."""
import math

import torch


def attention(q, k, v, allowed):
    q, k, v = q.float(), k.float(), v.float()
    if not allowed.any(dim=-1).all():
        raise ValueError("query row with no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
