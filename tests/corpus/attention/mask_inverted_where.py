"""Mistake: torch.where with its branches swapped, so allowed keys get -inf."""
import torch


def attention(q, k, v, allowed):
    dk = k.shape[-1]
    scores = torch.einsum("...td,...sd->...ts", q, k) / dk ** 0.5
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype)
    scores = torch.where(allowed, neg_inf, scores)
    if torch.isinf(scores).all(dim=-1).any():
        raise ValueError("no key left for some query")
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...ts,...sd->...td", weights, v), weights
