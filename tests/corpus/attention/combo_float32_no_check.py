"""Two mistakes: everything computed in float32 (dtype changes), and no ValueError for empty rows."""
import math

import torch


def attention(q, k, v, allowed):
    q = q.to(torch.float32)
    k = k.to(torch.float32)
    v = v.to(torch.float32)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
