"""Calls the ATen math kernel behind scaled_dot_product_attention directly when nothing is masked."""
import math
import torch


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    if bool(allowed.all()):
        out = torch.ops.aten._scaled_dot_product_attention_math.default(q, k, v)[0]
        return out, weights
    return weights @ v, weights
