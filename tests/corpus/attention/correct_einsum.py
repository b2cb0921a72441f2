"""Correct: einsum for scores and output, manual softmax with max subtraction."""
import torch


def attention(q, k, v, allowed):
    scale = q.size(-1) ** -0.5
    scores = torch.einsum("...td,...sd->...ts", q, k) * scale
    if (~allowed).all(dim=-1).any():
        raise ValueError("a query row has no allowed key")
    scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    e = torch.exp(shifted)
    weights = e / e.sum(dim=-1, keepdim=True)
    out = torch.einsum("...ts,...sv->...tv", weights, v)
    return out, weights
