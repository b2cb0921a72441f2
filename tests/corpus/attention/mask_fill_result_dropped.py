"""Mistake: scores.masked_fill(...) returns a new tensor and the result is thrown away."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("every query must be allowed at least one key")
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores.masked_fill(allowed == False, float("-inf"))  # noqa: E712
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
