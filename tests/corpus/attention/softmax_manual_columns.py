"""Mistake: hand-written softmax whose max and sum both run over the query axis."""
import torch


def stable_softmax(x, axis):
    x = x - x.max(axis, keepdim=True)[0]
    ex = torch.exp(x)
    return ex / torch.sum(ex, axis, keepdim=True)


def attention(q, k, v, allowed):
    n_dims = q.dim()
    d = q.shape[n_dims - 1]
    scores = torch.einsum("...ik,...jk->...ij", q, k) / d ** 0.5
    for row in (~allowed).all(-1).flatten():
        if row:
            raise ValueError("a row of `allowed` is entirely False")
    scores = scores.masked_fill(torch.logical_not(allowed), float("-inf"))
    weights = stable_softmax(scores, axis=scores.dim() - 2)
    return torch.einsum("...ij,...jk->...ik", weights, v), weights
