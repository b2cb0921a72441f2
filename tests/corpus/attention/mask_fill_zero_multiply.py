"""Mistake: the mask is multiplied into the scores (blocked scores become 0, not -inf)."""
import torch


def attention(q, k, v, allowed):
    d = q.shape[-1]
    if torch.count_nonzero(allowed, dim=-1).min() == 0:
        raise ValueError("a query has no key it may attend to")
    scores = torch.einsum("...td,...sd->...ts", q, k) / d ** 0.5
    scores = scores * allowed.to(scores.dtype)
    weights = scores.softmax(dim=-1)
    return torch.einsum("...ts,...sd->...td", weights, v), weights
