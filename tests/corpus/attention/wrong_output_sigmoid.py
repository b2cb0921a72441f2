"""Wrong output: sigmoid of the scores instead of a softmax over keys."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("query with no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.sigmoid(scores) * allowed
    return weights @ v, weights
