"""Mistake: scores divided by D instead of sqrt(D)."""
import torch


def attention(q, k, v, allowed):
    D = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-2, -1)) / D
    if (~allowed).all(dim=-1).any():
        raise ValueError("query with nothing to attend to")
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
