"""Cosine attention by hand: the scores divided by the product of the row norms."""
import torch


def attention(q, k, v, allowed):
    dots = torch.einsum("...td,...sd->...ts", q, k)
    norms = q.norm(dim=-1).unsqueeze(-1) * k.norm(dim=-1).unsqueeze(-2)
    scores = dots / norms * q.size(-1) ** -0.5
    if (~allowed).all(dim=-1).any():
        raise ValueError("a query row has no allowed key")
    scores = torch.where(allowed, scores, torch.full_like(scores, float("-inf")))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.einsum("...ts,...sv->...tv", weights, v), weights
