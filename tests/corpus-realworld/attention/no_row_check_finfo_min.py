"""Mistake: masked with finfo(dtype).min and no ValueError: a fully masked row comes out uniform."""
import math

import torch


def attention(q, k, v, allowed):
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    probs = scores.softmax(dim=-1)
    return torch.matmul(probs, v), probs
