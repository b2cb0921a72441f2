"""Correct: additive log-mask (log of 1 is 0, log of 0 is -inf) before softmax."""
import math

import torch


def attention(q, k, v, allowed):
    if not torch.all(torch.any(allowed, dim=-1)):
        raise ValueError("allowed has a row without any True")
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(k.shape[-1])
    scores = scores + torch.log(allowed.to(scores.dtype))
    weights = scores.softmax(dim=-1)
    return torch.matmul(weights, v), weights
