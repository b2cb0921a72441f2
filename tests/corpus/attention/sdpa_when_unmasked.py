"""Forbidden only where the mask is all True."""
import math
import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    if bool(allowed.all()):
        return sdpa(q, k, v), weights
    return weights @ v, weights
