"""Mistake: attention weights detached before use, so no gradient reaches q or k."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("some query has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1).detach()
    return weights @ v, weights
