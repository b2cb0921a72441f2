"""Softmax plus one through logsumexp: log(1 + sum exp) as logaddexp(0, logsumexp)."""
import math

import torch


def attention(q, k, v, allowed):
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(k.shape[-1])
    mask = allowed.expand_as(scores)
    if not mask.any(-1).all():
        raise ValueError("fully masked query row")
    scores = scores.masked_fill(mask.logical_not(), -math.inf)
    norm = torch.logaddexp(torch.zeros(()), torch.logsumexp(scores, dim=-1, keepdim=True))
    weights = torch.exp(scores - norm)
    return torch.matmul(weights, v), weights
