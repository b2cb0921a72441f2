"""Correct: a fused branch that is never taken on CPU."""
import math
import torch
import torch.nn.functional as F

USE_FUSED = False


def attention(q, k, v, allowed):
    allowed = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not bool(allowed.any(dim=-1).all()):
        raise ValueError("a query has no allowed key")
    if USE_FUSED or q.is_cuda:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return out, None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
