"""nn.Softmax(dim=2)."""
import math
import torch
from torch import nn

softmax = nn.Softmax(dim=2)


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    weights = softmax(scores.masked_fill(~allowed, float("-inf")))
    return torch.matmul(weights, v), weights
