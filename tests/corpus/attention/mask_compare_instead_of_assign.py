"""Mistake: `scores[...] == -inf` (a comparison) where an assignment was meant."""
import math

import torch


def attention(q, k, v, allowed):
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    allowed, scores = torch.broadcast_tensors(allowed, scores)
    scores = scores.clone()
    if not allowed.any(dim=-1).all():
        raise ValueError("fully masked query row")
    scores[~allowed] == float("-inf")
    p = torch.softmax(scores, dim=-1)
    return p @ v, p
