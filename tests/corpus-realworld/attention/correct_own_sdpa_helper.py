"""Correct: the student's own helper named scaled_dot_product_attention (as in the torch docs).

The helper shares its name with the forbidden fused function but is the student's code.
"""
import math

import torch


def scaled_dot_product_attention(Q, K, V, attn_mask=None):
    scale = 1 / math.sqrt(Q.size(-1))
    attn_weight = Q @ K.transpose(-2, -1) * scale
    if attn_mask is not None:
        attn_weight = attn_weight.masked_fill(attn_mask.logical_not(), float("-inf"))
    attn_weight = torch.softmax(attn_weight, dim=-1)
    return attn_weight @ V, attn_weight


def attention(q, k, v, allowed):
    if not torch.any(allowed, dim=-1).all():
        raise ValueError("every query row needs an allowed key")
    return scaled_dot_product_attention(q, k, v, attn_mask=allowed)
