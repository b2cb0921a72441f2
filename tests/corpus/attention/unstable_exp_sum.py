"""Mistake: softmax written as exp(scores) / exp(scores).sum(): no row maximum subtracted."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("some query has no key it may attend to")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~allowed, float("-inf"))
    exp_scores = torch.exp(scores)
    weights = exp_scores / exp_scores.sum(dim=-1, keepdim=True)
    return weights @ v, weights
