"""Forbidden: output from F.scaled_dot_product_attention (weights computed by hand); else correct."""
import math

import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("a query row has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return output, weights
