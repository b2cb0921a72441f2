"""Mistake: the fused F.scaled_dot_product_attention used whenever torch has it (always, here),
with a manual fallback for old versions; the weights are recomputed by hand for the return."""
import math

import torch
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("every query needs an allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    if HAS_SDPA:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    else:
        out = weights @ v
    return out, weights
