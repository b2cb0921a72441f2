"""Mistake: scores computed under torch.no_grad() "to save memory"; q and k get no gradient."""
import math

import torch


def attention(q, k, v, allowed):
    if (~allowed).all(-1).any():
        raise ValueError("row with every key blocked")
    with torch.no_grad():
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(k.size(-1))
        scores.masked_fill_(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
