"""Mistake: an additive bias of -1e9 where the mask is 1, the "mask = positions to hide" reading."""
import math

import torch


def attention(q, k, v, allowed):
    if (~allowed).all(dim=-1).any():
        raise ValueError("a query row has no allowed key")
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    scores = scores + allowed.to(scores.dtype) * -1e9
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
