"""Interface: the function is called scaled_attention, so `attention` is missing."""
import math

import torch


def scaled_attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
