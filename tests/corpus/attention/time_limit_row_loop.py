"""Time limit: a while loop checking query rows never advances its index."""
import math

import torch


def attention(q, k, v, allowed):
    mask = torch.broadcast_to(allowed, allowed.shape[:-2] + (q.shape[-2], k.shape[-2]))
    i = 0
    while i < mask.shape[-2]:
        if not mask[..., i, :].any(dim=-1).all():
            raise ValueError(f"query {i} has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
