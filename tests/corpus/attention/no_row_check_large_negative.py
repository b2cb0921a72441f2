"""Mistake: -1e9 fill and no row check, so a fully blocked row silently gets uniform weights."""
import math

import torch


def attention(q, k, v, allowed):
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    scores = scores.masked_fill(allowed.logical_not(), -1e9)
    weights = torch.softmax(scores, dim=-1)
    output = torch.matmul(weights, v)
    return output, weights
