"""Scale applied twice."""
import math
import torch


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    d = q.size(-1)
    q = q / math.sqrt(d)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
