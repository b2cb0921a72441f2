"""Wrong output: softmax denominator gets +1 ("for stability"), so rows sum to less than 1."""
import math

import torch


def attention(q, k, v, allowed):
    if (~allowed).all(-1).any():
        raise ValueError("every key blocked for a query")
    scores = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~allowed, float("-inf"))
    scores = scores - scores.amax(-1, keepdim=True)
    e = scores.exp()
    weights = e / (e.sum(-1, keepdim=True) + 1)
    return torch.einsum("...ts,...sd->...td", weights, v), weights
