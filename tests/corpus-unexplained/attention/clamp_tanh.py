"""Scores squashed by 5 * tanh(scores / 5), a soft cap, before the softmax."""
import math

import torch


def attention(q, k, v, allowed):
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = 5.0 * torch.tanh(scores / 5.0)
    mask = allowed.expand_as(scores)
    if not mask.any(-1).all():
        raise ValueError("fully masked query row")
    weights = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    return torch.matmul(weights, v), weights
