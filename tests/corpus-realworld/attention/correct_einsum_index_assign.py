"""Correct: a course-library style with its own softmax, einsum '... q d, ... k d -> ... q k'
and boolean-index assignment of -inf on the expanded mask."""
import math

import torch


def softmax(x, dim):
    shifted = x - x.max(dim=dim, keepdim=True).values
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def attention(q, k, v, allowed):
    qk = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(k.shape[-1])
    mask = allowed.expand_as(qk)
    if not mask.any(dim=-1).all():
        raise ValueError("fully masked query row")
    qk[~mask] = -math.inf
    weights = softmax(qk, dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
